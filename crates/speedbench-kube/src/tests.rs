use super::*;

fn input() -> ShardedJob {
    ShardedJob {
        name: "bench1".into(),
        namespace: "perf".into(),
        image: "registry.example/speedbench:0.1.0".into(),
        image_pull_policy: Some(PullPolicy::IfNotPresent),
        command: vec!["speedbench".into()],
        shards: 4,
        run_id: "bench1".into(),
        profile_args: ["--url", "http://vllm:8000", "--bench", "qualitative"]
            .map(String::from)
            .to_vec(),
        start_at_unix: 1_800_000_000.5,
        resources: Resources {
            requests: BTreeMap::from([("cpu".into(), "2".into()), ("memory".into(), "1Gi".into())]),
            limits: BTreeMap::from([("memory".into(), "2Gi".into())]),
        },
        secrets: vec!["OPENAI_API_KEY=llm-api:key".parse().unwrap()],
        output: ResultsOutput::Pvc(PvcOutput {
            claim: "bench-results".into(),
            mount_path: "/results".into(),
        }),
        env: BTreeMap::new(),
        service_account: None,
        labels: BTreeMap::from([("team".into(), "serving".into())]),
        spread: Spread::Preferred,
        active_deadline_seconds: Some(3600),
    }
}

fn built() -> Job {
    build_job(&input()).unwrap()
}

fn reason(e: KubeError) -> String {
    e.to_string()
}

fn refused(job: &ShardedJob) -> String {
    reason(build_job(job).expect_err("accepted"))
}

fn container_mut(job: &mut Job) -> &mut Container {
    &mut job
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
}

#[test]
fn the_job_is_indexed_one_pod_per_shard_never_retried() {
    let job = built();
    let spec = job.spec.as_ref().unwrap();
    assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
    assert_eq!(spec.completions, Some(4));
    assert_eq!(spec.parallelism, Some(4));
    assert_eq!(spec.backoff_limit_per_index, Some(0));
    assert_eq!(spec.active_deadline_seconds, Some(3600));
    let pod = spec.template.spec.as_ref().unwrap();
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    let c = &pod.containers[0];
    assert_eq!(c.command.as_deref(), Some(&["speedbench".to_string()][..]));
    let args = c.args.as_ref().unwrap();
    assert_eq!(
        args,
        &[
            "profile",
            "--url",
            "http://vllm:8000",
            "--bench",
            "qualitative",
            "--shard-count",
            "4",
            "--shard-index",
            "$(SPEEDBENCH_SHARD_INDEX)",
            "--run-id",
            "bench1",
            "--start-at",
            "1800000000.5",
            "--output-artifact-dir",
            "/results/bench1/shard$(SPEEDBENCH_SHARD_INDEX)of4",
        ]
    );
}

#[test]
fn each_pod_learns_its_index_from_the_api_and_its_key_from_a_secret() {
    let job = built();
    let pod = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    let env = pod.containers[0].env.as_ref().unwrap();
    assert_eq!(env[0].name, SHARD_INDEX_ENV);
    assert_eq!(
        env[0]
            .value_from
            .as_ref()
            .unwrap()
            .field_ref
            .as_ref()
            .unwrap()
            .field_path,
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    );
    assert_eq!(env[1].name, "OPENAI_API_KEY");
    assert_eq!(env[1].value, None);
    let secret = env[1]
        .value_from
        .as_ref()
        .unwrap()
        .secret_key_ref
        .as_ref()
        .unwrap();
    assert_eq!(
        (secret.name.as_str(), secret.key.as_str()),
        ("llm-api", "key")
    );
    let labels = job.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[RUN_ID_LABEL], "bench1");
    assert_eq!(labels["team"], "serving");
    let spread = &pod.topology_spread_constraints.as_ref().unwrap()[0];
    assert_eq!(spread.when_unsatisfiable, "ScheduleAnyway");
    assert_eq!(spread.topology_key, "kubernetes.io/hostname");
}

#[test]
fn the_json_round_trips_through_the_types_and_still_passes_the_checks() {
    let job = built();
    let text = serde_json::to_string_pretty(&job).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["apiVersion"], "batch/v1");
    assert_eq!(value["kind"], "Job");
    assert_eq!(value["spec"]["completionMode"], "Indexed");
    assert_eq!(value["spec"]["backoffLimitPerIndex"], 0);
    assert_eq!(
        value["spec"]["template"]["spec"]["containers"][0]["env"][1]["valueFrom"]["secretKeyRef"]["name"],
        "llm-api"
    );
    assert_eq!(
        value["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"],
        "2Gi"
    );
    assert!(value.get("status").is_none(), "a status in a manifest");
    let back: Job = serde_json::from_str(&text).unwrap();
    assert_eq!(back, job);
    check_job(&back).unwrap();
    assert_eq!(serde_json::to_string_pretty(&back).unwrap(), text);
}

#[test]
fn expanded_args_are_what_each_pod_runs() {
    let job = built();
    let args = expanded_args(&job, 3, "SECRET");
    assert_eq!(args[8], "3");
    assert_eq!(args[14], "/results/bench1/shard3of4");
    let mut env = BTreeMap::new();
    env.insert("A", "x".to_string());
    assert_eq!(expand("$(A)-$(B)-$$(A)-$-$(", &env), "x-$(B)-$(A)-$-$(");
}

#[test]
fn no_spread_and_no_resources_leave_the_fields_out() {
    let mut i = input();
    i.spread = Spread::None;
    i.resources = Resources::default();
    i.secrets.clear();
    i.image_pull_policy = None;
    i.active_deadline_seconds = None;
    let job = build_job(&i).unwrap();
    let value = serde_json::to_value(&job).unwrap();
    let pod = &value["spec"]["template"]["spec"];
    assert!(pod.get("topologySpreadConstraints").is_none());
    assert!(pod["containers"][0].get("resources").is_none());
    assert!(pod["containers"][0].get("imagePullPolicy").is_none());
    let mut r = input();
    r.spread = Spread::Required;
    let job = build_job(&r).unwrap();
    let pod = job.spec.unwrap().template.spec.unwrap();
    assert_eq!(
        pod.topology_spread_constraints.unwrap()[0].when_unsatisfiable,
        "DoNotSchedule"
    );
}

#[test]
fn bad_names_are_refused() {
    let mut i = input();
    i.name = "Bench_1".into();
    assert!(
        refused(&i).contains("metadata.name \"Bench_1\""),
        "{}",
        refused(&i)
    );
    let mut i = input();
    i.namespace = "perf.team".into();
    assert!(refused(&i).contains("metadata.namespace"));
    let mut i = input();
    i.name = "a".repeat(62);
    assert!(
        refused(&i).contains("hostnames NAME-INDEX reach 64"),
        "{}",
        refused(&i)
    );
    let mut i = input();
    i.name = "a".repeat(61);
    build_job(&i).unwrap();
    i.shards = 11;
    assert!(refused(&i).contains("reach 64"));
    let mut i = input();
    i.run_id = "bench 1".into();
    assert!(refused(&i).contains("run id"));
    let mut i = input();
    i.run_id = String::new();
    assert!(refused(&i).contains("run id is required"));
}

#[test]
fn bad_labels_are_refused() {
    let mut i = input();
    i.labels.insert("team".into(), "-x".into());
    assert!(
        refused(&i).contains("metadata.labels team"),
        "{}",
        refused(&i)
    );
    let mut i = input();
    i.labels.insert("Bad_Prefix/x".into(), "y".into());
    assert!(refused(&i).contains("metadata.labels key"));
    let mut i = input();
    i.labels.insert(RUN_ID_LABEL.into(), "other".into());
    assert!(refused(&i).contains("set by speedbench itself"));
}

#[test]
fn shard_counts_outside_the_api_limits_are_refused() {
    for n in [0, MAX_SHARDS + 1] {
        let mut i = input();
        i.shards = n;
        assert!(refused(&i).contains("must be 1 to 100000"), "{n}");
    }
    let mut i = input();
    i.name = "b".into();
    i.shards = 1;
    build_job(&i).unwrap();
}

#[test]
fn an_image_is_required_and_whole() {
    let mut i = input();
    i.image = String::new();
    assert!(refused(&i).contains("image is required"));
    let mut i = input();
    i.image = " speedbench:1".into();
    assert!(refused(&i).contains("whitespace"));
    let mut i = input();
    i.command = vec![];
    assert!(refused(&i).contains("command is required"));
}

#[test]
fn quantities_that_do_not_parse_or_exceed_their_limit_are_refused() {
    let mut i = input();
    i.resources.requests.insert("memory".into(), "1GB".into());
    assert!(
        refused(&i).contains("resources.requests.memory \"1GB\""),
        "{}",
        refused(&i)
    );
    let mut i = input();
    i.resources.limits.insert("cpu".into(), "-1".into());
    assert!(refused(&i).contains("negative"));
    let mut i = input();
    i.resources.requests.insert("memory".into(), "3Gi".into());
    assert!(refused(&i).contains("more than its limit 2Gi"));
    let mut i = input();
    i.resources
        .requests
        .insert("memory".into(), "2048Mi".into());
    build_job(&i).unwrap();
    let mut i = input();
    i.resources.requests.insert("gpu".into(), "1".into());
    assert!(refused(&i).contains("extended resource with a domain prefix"));
    let mut i = input();
    i.resources
        .requests
        .insert("nvidia.com/gpu".into(), "1".into());
    assert!(refused(&i).contains("needs a limit too"));
    i.resources
        .limits
        .insert("nvidia.com/gpu".into(), "2".into());
    assert!(refused(&i).contains("must equal its limit 2"));
    i.resources
        .limits
        .insert("nvidia.com/gpu".into(), "1".into());
    build_job(&i).unwrap();
    i.resources
        .limits
        .insert("nvidia.com/gpu".into(), "500m".into());
    assert!(refused(&i).contains("whole number"));
}

#[test]
fn secret_references_are_checked_and_literals_refused() {
    let literal = "OPENAI_API_KEY=sk-123".parse::<SecretEnv>().unwrap_err();
    assert!(
        matches!(literal, KubeError::LiteralSecret { .. }),
        "{literal}"
    );
    assert!(
        "1KEY=s:k"
            .parse::<SecretEnv>()
            .unwrap_err()
            .to_string()
            .contains("environment variable name")
    );
    // A SECRET:KEY that is not one may be a literal with a colon: refused
    // as a literal, and neither part is echoed.
    for (text, part) in [
        ("HF_TOKEN=Bad_Secret:k", "Bad_Secret"),
        ("HF_TOKEN=hf:a/b", "a/b"),
    ] {
        let e = text.parse::<SecretEnv>().unwrap_err();
        assert!(matches!(e, KubeError::LiteralSecret { .. }), "{e}");
        assert!(e.to_string().contains("secret env"), "{e}");
        assert!(!e.to_string().contains(part), "{e}");
    }
    for literal in ["HF_TOKEN", "hunter2-literal", "sk-abcdefghijklmnopqrstuv"] {
        let e = literal.parse::<SecretEnv>().unwrap_err().to_string();
        assert!(e.contains("ENV=SECRET:KEY") && !e.contains(literal), "{e}");
    }
    let mut i = input();
    i.secrets.push(i.secrets[0].clone());
    assert!(refused(&i).contains("env \"OPENAI_API_KEY\" is given twice"));
    let mut i = input();
    i.secrets.push(SecretEnv {
        env: SHARD_INDEX_ENV.into(),
        secret: "s".into(),
        key: "k".into(),
    });
    assert!(refused(&i).contains("given twice"));
}

/// The credentials the issue's hostile round got into a manifest through
/// `profile`'s flags, each as a user would give it: every one is refused,
/// and no error quotes it.
#[test]
fn every_literal_credential_in_a_flag_is_refused_and_never_echoed() {
    let secret = "s3cr3t-value-9";
    let key = "sk-abcdefghijklmnopqrstuv";
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefghijk";
    let profile_cases: Vec<Vec<String>> = [
        vec![
            "--extra-inputs".into(),
            format!(r#"{{"metadata":{{"api_key":"{secret}"}}}}"#),
        ],
        vec![format!("--extra-inputs=hf_token:{secret}")],
        vec!["--extra-inputs".into(), format!("session:{key}")],
        vec![
            "--extra-inputs".into(),
            format!(r#"metadata:{{"token":"{secret}"}}"#),
        ],
        vec!["-H".into(), format!("X-Custom: Bearer {secret}")],
        vec!["-H".into(), format!("X-Custom: {key}")],
        vec!["--header".into(), format!("X-Custom: {jwt}")],
        vec!["-H".into(), format!("Cookie: s={secret}")],
    ]
    .to_vec();
    for args in profile_cases {
        let mut i = input();
        i.profile_args.extend(args.iter().cloned());
        let e = build_job(&i).unwrap_err();
        assert!(
            matches!(e, KubeError::LiteralSecret { .. }),
            "{args:?}: {e}"
        );
        let text = e.to_string();
        assert!(
            !text.contains(secret) && !text.contains(key) && !text.contains(jwt),
            "{text}"
        );
    }
}

/// The environment half of the issue's literals: names read word by word,
/// values holding a header, a URL password or a key shape.
#[test]
fn every_literal_credential_in_the_environment_is_refused_and_never_echoed() {
    let secret = "s3cr3t-value-9";
    let key = "sk-abcdefghijklmnopqrstuv";
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefghijk";
    for (name, value) in [
        ("AWS_CREDS", secret.to_string()),
        ("HF_TKN", secret.to_string()),
        ("PASS", "hunter2".to_string()),
        ("DB_PWD", "hunter2".to_string()),
        ("EXTRA_HEADER", format!("Authorization: Bearer {secret}")),
        ("EXTRA", format!("X-Custom: {jwt}")),
        ("UPSTREAM", format!("https://user:{secret}@h/v1")),
        ("FOO", key.to_string()),
    ] {
        let mut i = input();
        i.env.insert(name.into(), value.clone());
        let e = build_job(&i).unwrap_err();
        assert!(matches!(e, KubeError::LiteralSecret { .. }), "{name}: {e}");
        assert!(!e.to_string().contains(&value), "{e}");
    }
    let mut i = input();
    i.labels.insert("owner".into(), key.into());
    assert!(!refused(&i).contains(key));
    let mut i = input();
    i.output = ResultsOutput::Store {
        url: format!("s3://b/p?x-amz-security-token={secret}"),
    };
    assert!(!refused(&i).contains(secret));
    // What stays allowed: ordinary environment and flags.
    let mut i = input();
    i.env
        .insert("TOKENIZERS_PARALLELISM".into(), "false".into());
    i.env
        .insert("EXTRA_HEADER".into(), "X-Team: serving".into());
    i.profile_args
        .extend(["--extra-inputs", "temperature:0", "-H", "X-Priority: high"].map(String::from));
    build_job(&i).unwrap();
}

#[test]
fn a_literal_credential_in_a_job_is_refused_by_the_checks() {
    let mut job = built();
    let env = container_mut(&mut job).env.as_mut().unwrap();
    env[1].value_from = None;
    env[1].value = Some("sk-123".into());
    assert!(matches!(
        check_job(&job),
        Err(KubeError::LiteralSecret { .. })
    ));
    let mut job = built();
    let env = container_mut(&mut job).env.as_mut().unwrap();
    env[1].value = Some("x".into());
    assert!(reason(check_job(&job).unwrap_err()).contains("not both"));
}

#[test]
fn profile_flags_the_manifest_sets_or_literal_credentials_are_refused() {
    for (flag, value) in [
        ("--shard", Some("0/4")),
        ("--shard-count", Some("4")),
        ("--shard-index", Some("0")),
        ("--run-id", Some("x")),
        ("--start-at", Some("1")),
        ("--start-after-barrier", Some("/f")),
        ("--output-artifact-dir", Some("/x")),
        ("--overwrite", None),
        ("--output", Some("x.json")),
        ("--api-key", Some("sk-1")),
        ("--config", Some("s.toml")),
    ] {
        for form in [
            value.map_or(vec![flag.to_string()], |v| {
                vec![flag.to_string(), v.to_string()]
            }),
            value.map_or(vec![], |v| vec![format!("{flag}={v}")]),
        ] {
            if form.is_empty() {
                continue;
            }
            let mut i = input();
            i.profile_args.extend(form.clone());
            let e = build_job(&i).unwrap_err();
            assert!(
                matches!(&e, KubeError::ReservedFlag { flag: f, .. } if f == flag),
                "{form:?}: {e}"
            );
        }
    }
}

#[test]
fn credential_headers_must_come_from_a_secret() {
    for header in [
        vec!["-H", "Authorization:Bearer sk-1"],
        vec!["--header", "X-Api-Key: sk-1"],
        vec!["--header=Authorization:Bearer sk-1"],
        vec!["-HAuthorization:Bearer sk-1"],
    ] {
        let mut i = input();
        i.profile_args.extend(header.iter().map(|s| s.to_string()));
        assert!(
            matches!(build_job(&i), Err(KubeError::LiteralSecret { .. })),
            "{header:?}"
        );
    }
    let mut i = input();
    i.profile_args.extend(
        [
            "-H",
            "Authorization:Bearer $(OPENAI_API_KEY)",
            "-H",
            "X-Team:a",
        ]
        .map(String::from),
    );
    build_job(&i).unwrap();
    let mut i = input();
    i.profile_args.clear();
    assert!(refused(&i).contains("profile flags is required"));
    let mut i = input();
    i.profile_args.insert(0, "profile".into());
    assert!(refused(&i).contains("give the flags only"));
}

fn pvc_mut(job: &mut ShardedJob) -> &mut PvcOutput {
    match &mut job.output {
        ResultsOutput::Pvc(pvc) => pvc,
        ResultsOutput::Store { .. } => panic!("not a claim"),
    }
}

fn store_input(url: &str) -> ShardedJob {
    let mut i = input();
    i.output = ResultsOutput::Store { url: url.into() };
    i.env = BTreeMap::from([
        ("AWS_REGION".into(), "eu-west-1".into()),
        ("AWS_ENDPOINT_URL".into(), "https://minio.perf:9000".into()),
    ]);
    i.secrets.extend([
        "AWS_ACCESS_KEY_ID=s3:id".parse().unwrap(),
        "AWS_SECRET_ACCESS_KEY=s3:secret".parse().unwrap(),
    ]);
    i.service_account = Some("bench-writer".into());
    i
}

#[test]
fn outputs_and_start_times_are_checked() {
    let mut i = input();
    pvc_mut(&mut i).mount_path = "results".into();
    assert!(refused(&i).contains("absolute"));
    let mut i = input();
    pvc_mut(&mut i).mount_path = "/a/../b".into();
    assert!(refused(&i).contains("'..'"));
    let mut i = input();
    pvc_mut(&mut i).claim = "Results".into();
    assert!(refused(&i).contains("claimName"));
    for bad in [
        "bucket/x",
        "s3://",
        "s3:///",
        "S3://b",
        "s3://b/a b",
        "s3://b/$(X)",
    ] {
        assert!(refused(&store_input(bad)).contains("results url"), "{bad}");
    }
    for t in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let mut i = input();
        i.start_at_unix = t;
        assert!(refused(&i).contains("Unix time"), "{t}");
    }
}

#[test]
fn a_store_output_mounts_nothing_and_names_each_shards_url() {
    let job = build_job(&store_input("s3://runs/perf/")).unwrap();
    let pod = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    assert_eq!(pod.volumes, None);
    assert_eq!(pod.service_account_name.as_deref(), Some("bench-writer"));
    let c = &pod.containers[0];
    assert_eq!(c.volume_mounts, None);
    let env: BTreeMap<&str, Option<&str>> = c
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.as_str(), e.value.as_deref()))
        .collect();
    assert_eq!(env["AWS_REGION"], Some("eu-west-1"));
    assert_eq!(env["AWS_ENDPOINT_URL"], Some("https://minio.perf:9000"));
    assert_eq!(env["AWS_SECRET_ACCESS_KEY"], None, "a Secret reference");
    for index in [0, 3] {
        let args = expanded_args(&job, index, "x");
        let at = args
            .iter()
            .position(|a| a == "--output-artifact-dir")
            .unwrap();
        assert_eq!(
            args[at + 1],
            format!("s3://runs/perf/bench1/shard{index}of4")
        );
    }
    check_job(&job).unwrap();
}

#[test]
fn plain_env_and_the_service_account_are_checked() {
    let mut i = store_input("s3://runs");
    i.env.insert("AWS_SECRET_ACCESS_KEY".into(), "abc".into());
    assert!(matches!(
        build_job(&i),
        Err(KubeError::LiteralSecret { .. })
    ));
    let mut i = store_input("s3://runs");
    i.env.insert(SHARD_INDEX_ENV.into(), "0".into());
    assert!(
        refused(&i).contains(&format!("{SHARD_INDEX_ENV:?} is given twice")),
        "{}",
        refused(&i)
    );
    let mut i = store_input("s3://runs");
    i.env.insert("1BAD".into(), "x".into());
    assert!(refused(&i).contains("env name"));
    let mut i = store_input("s3://runs");
    i.service_account = Some("Bench_Writer".into());
    assert!(refused(&i).contains("serviceAccountName"));
}

#[test]
fn job_fields_a_cluster_rejects_are_named() {
    let mut job = built();
    job.spec.as_mut().unwrap().parallelism = Some(2);
    assert!(reason(check_job(&job).unwrap_err()).contains("spec.parallelism \"2\""));
    let mut job = built();
    job.spec.as_mut().unwrap().completion_mode = None;
    assert!(reason(check_job(&job).unwrap_err()).contains("must be Indexed"));
    let mut job = built();
    job.spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .restart_policy = Some("OnFailure".into());
    assert!(
        reason(check_job(&job).unwrap_err()).contains("must be Never with backoffLimitPerIndex")
    );
    let mut job = built();
    job.spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .restart_policy = None;
    assert!(reason(check_job(&job).unwrap_err()).contains("Never or OnFailure"));
    let mut job = built();
    job.spec.as_mut().unwrap().backoff_limit_per_index = Some(-1);
    assert!(reason(check_job(&job).unwrap_err()).contains("negative"));
}

#[test]
fn pod_fields_a_cluster_rejects_are_named() {
    let mut job = built();
    container_mut(&mut job).name = "Speed".into();
    assert!(reason(check_job(&job).unwrap_err()).contains("container name"));
    let mut job = built();
    container_mut(&mut job).image_pull_policy = Some("Sometimes".into());
    assert!(reason(check_job(&job).unwrap_err()).contains("imagePullPolicy"));
    let mut job = built();
    container_mut(&mut job).volume_mounts.as_mut().unwrap()[0].name = "other".into();
    assert!(reason(check_job(&job).unwrap_err()).contains("names no volume"));
    let mut job = built();
    let spread = job
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .topology_spread_constraints
        .as_mut()
        .unwrap();
    spread[0].max_skew = 0;
    assert!(reason(check_job(&job).unwrap_err()).contains("maxSkew"));
    let mut job = built();
    job.spec.as_mut().unwrap().selector = Some(LabelSelector::default());
    assert!(reason(check_job(&job).unwrap_err()).contains("spec.selector"));
    let mut job = built();
    let env = container_mut(&mut job).env.as_mut().unwrap();
    env[1].value_from.as_mut().unwrap().field_ref = Some(ObjectFieldSelector::default());
    assert!(reason(check_job(&job).unwrap_err()).contains("exactly one source"));
}

#[test]
fn quantities_past_the_api_servers_and_controller_labels_are_refused() {
    for (name, q) in [("memory", "9Ei"), ("memory", "1e19"), ("cpu", "1e16")] {
        let mut i = input();
        i.resources.requests.insert(name.into(), q.into());
        i.resources.limits.remove(name);
        assert!(refused(&i).contains("too large"), "{name}={q}");
    }
    let mut i = input();
    i.resources.requests.insert("cpu".into(), "9e15".into());
    build_job(&i).unwrap();
    let mut i = input();
    i.labels.insert("pod-template-hash".into(), "x".into());
    assert!(refused(&i).contains("reserved"));
}
