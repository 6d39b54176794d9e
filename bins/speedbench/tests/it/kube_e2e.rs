//! `speedbench kube manifest` end to end, with no cluster: the printed Job
//! reads back through the typed k8s-openapi structs unchanged, passes
//! the API server's checks and Kubernetes 1.33's own OpenAPI schema
//! (`kubernetes-validate --strict`, every manifest printed here, each
//! option's variant included); each Pod's arguments, expanded as the kubelet
//! expands them, run as shards against the simulated server and merge into
//! one run in `speedbench report`; refusals (a literal credential, a flag
//! `profile` does not take, a flag the manifest sets, a load too small for
//! the shards, names and quantities a cluster rejects) print no manifest.

use crate::common;

use std::process::Output;
use std::time::{SystemTime, UNIX_EPOCH};

use common::*;
use k8s_openapi::api::batch::v1::Job;
use serde_json::Value;
use speedbench_sim::SimConfig;

const SHARDS: u32 = 3;
const REQUESTS: u64 = 30;

fn manifest_args<'a>(
    url: &'a str,
    start_at: &'a str,
    input: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        "kube",
        "manifest",
        "--name",
        "bench-k8s",
        "--namespace",
        "perf",
        "--image",
        "registry.example/speedbench:0.1.0",
        "--shards",
        "3",
        "--start-at",
        start_at,
        "--pvc",
        "bench-results",
        "--mount-path",
        "/results",
        "--secret-env",
        "OPENAI_API_KEY=llm-api:key",
        "--secret-env",
        "HF_TOKEN=hf:token",
        "--request",
        "cpu=2",
        "--request",
        "memory=512Mi",
        "--limit",
        "memory=1Gi",
        "--label",
        "team=serving",
        "--spread",
        "preferred",
    ];
    args.extend(extra);
    args.extend([
        "--",
        "--url",
        url,
        "-m",
        "speedbench-sim",
        "--streaming",
        "--input-file",
        input,
        "--request-count",
        "30",
        "--concurrency",
        "6",
        "--server-metrics-shutdown-delay",
        "0",
    ]);
    args
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// `report --format json` printed the three shards as one complete run of
/// every request.
fn assert_one_merged_run(out: &Output) {
    assert!(out.status.success(), "{}", stderr(out));
    assert!(
        stderr(out).contains("merged 3 shards of run bench-k8s"),
        "{}",
        stderr(out)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{json}");
    assert_eq!(rows[0]["succeeded"], REQUESTS);
    assert_eq!(rows[0]["complete"], true);
    assert_eq!(rows[0]["shards"]["merged"], serde_json::json!([0, 1, 2]));
}

/// The Pod's container arguments for shard `index`, as the kubelet hands
/// them over: `$(SPEEDBENCH_SHARD_INDEX)` is the Pod's completion index.
fn pod_args(job: &Job, index: u32) -> Vec<String> {
    speedbench_kube::expanded_args(job, index, "unused")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manifest_round_trips_and_its_pods_run_as_one_sharded_run() {
    let server = sim(SimConfig::speed_bench_demo().with_output_tokens(4, 16)).await;
    let url = server.url();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    // Milliseconds, written as the manifest writes an f64 (`1.5`, not `1.500`).
    let start_at = ((now.as_millis() + 2000) as f64 / 1000.0).to_string();
    let fixture = fixture();
    let out = run(&manifest_args(
        &url,
        &start_at,
        fixture.to_str().unwrap(),
        &[],
    ))
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "starts its measured phase at Unix time {start_at}"
        )),
        "{}",
        stderr(&out)
    );

    // Typed round trip: JSON -> Job -> JSON is the printed text, and the
    // Job passes every check a cluster would make on these fields.
    let text = String::from_utf8(out.stdout).unwrap();
    let job: Job = serde_json::from_str(&text).expect("a batch/v1 Job");
    speedbench_kube::check_job(&job).unwrap();
    // And by Kubernetes's own schema, independently of speedbench's checks.
    speedbench_test_support::kube::assert_valid_manifests(&[&text]);
    assert_eq!(
        serde_json::to_string_pretty(&job).unwrap(),
        text.trim_end(),
        "the printed manifest is not what the types write back"
    );
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["apiVersion"], "batch/v1");
    assert_eq!(value["kind"], "Job");
    assert_eq!(value["metadata"]["name"], "bench-k8s");
    assert_eq!(value["metadata"]["namespace"], "perf");
    let spec = &value["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    assert_eq!(spec["completions"], SHARDS);
    assert_eq!(spec["parallelism"], SHARDS);
    assert_eq!(spec["backoffLimitPerIndex"], 0);
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(
        pod["volumes"][0]["persistentVolumeClaim"]["claimName"],
        "bench-results"
    );
    assert_eq!(
        pod["topologySpreadConstraints"][0]["whenUnsatisfiable"],
        "ScheduleAnyway"
    );
    let c = &pod["containers"][0];
    assert_eq!(c["image"], "registry.example/speedbench:0.1.0");
    assert_eq!(c["resources"]["requests"]["cpu"], "2");
    assert_eq!(c["resources"]["requests"]["memory"], "512Mi");
    assert_eq!(c["resources"]["limits"]["memory"], "1Gi");
    assert_eq!(c["volumeMounts"][0]["mountPath"], "/results");
    // Secrets by reference only: no env var has a literal value.
    let env = c["env"].as_array().unwrap();
    assert!(env.iter().all(|e| e.get("value").is_none()), "{env:?}");
    for (name, secret, key) in [
        ("OPENAI_API_KEY", "llm-api", "key"),
        ("HF_TOKEN", "hf", "token"),
    ] {
        let e = env.iter().find(|e| e["name"] == name).expect(name);
        assert_eq!(e["valueFrom"]["secretKeyRef"]["name"], secret);
        assert_eq!(e["valueFrom"]["secretKeyRef"]["key"], key);
    }
    assert_eq!(value["metadata"]["labels"]["team"], "serving");
    assert_eq!(
        spec["template"]["metadata"]["labels"]["speedbench.dev/run-id"],
        "bench-k8s"
    );

    // Every Pod shares one start and one run id and writes its own directory.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("results");
    let mut cmds = Vec::new();
    for index in 0..SHARDS {
        let args = pod_args(&job, index);
        let at = |flag: &str| {
            let i = args.iter().position(|a| a == flag).expect(flag);
            args[i + 1].clone()
        };
        assert_eq!(at("--start-at"), start_at);
        assert_eq!(at("--run-id"), "bench-k8s");
        assert_eq!(at("--shard-count"), SHARDS.to_string());
        assert_eq!(at("--shard-index"), index.to_string());
        let dir = at("--output-artifact-dir");
        assert_eq!(dir, format!("/results/bench-k8s/shard{index}of{SHARDS}"));
        // The claim's mount is a temporary directory here.
        let args: Vec<String> = args
            .iter()
            .map(|a| {
                if *a == dir {
                    root.join(dir.trim_start_matches("/results/"))
                        .to_string_lossy()
                        .into_owned()
                } else {
                    a.clone()
                }
            })
            .collect();
        let mut cmd = bin();
        cmd.args(&args).env("OPENAI_API_KEY", "placeholder");
        cmds.push(cmd);
    }
    let handles: Vec<_> = cmds
        .into_iter()
        .map(|mut c| tokio::spawn(async move { c.output().await.expect("the binary runs") }))
        .collect();
    for h in handles {
        let out = h.await.unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert_eq!(server.ground_truth().requests, REQUESTS);
    server.shutdown().await;

    let parent = root.join("bench-k8s");
    let out = run(&["report", parent.to_str().unwrap(), "--format", "json"]).await;
    assert_one_merged_run(&out);
}

/// With `--results-url` instead of a claim: no volume, the store's
/// endpoint and region as plain env, its keys as Secret refs; the Pods'
/// arguments (expanded with the plain env, the Secrets given as the
/// kubelet would from the Secret) upload three shards to moto, and
/// `report` over the run's URL merges them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_writing_to_an_object_store_merge_in_a_report_over_the_url() {
    let Some(s3) = speedbench_test_support::s3::S3Server::start("runs") else {
        return;
    };
    let server = sim(SimConfig::speed_bench_demo().with_output_tokens(4, 16)).await;
    let url = server.url();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let start_at = ((now.as_millis() + 2000) as f64 / 1000.0).to_string();
    let fixture = fixture();
    let env: Vec<(&str, String)> = s3.env();
    let plain = |name: &str| {
        let value = &env.iter().find(|(k, _)| *k == name).unwrap().1;
        format!("{name}={value}")
    };
    let (endpoint, region, allow) = (
        plain("AWS_ENDPOINT_URL"),
        plain("AWS_REGION"),
        plain("AWS_ALLOW_HTTP"),
    );
    let mut args = manifest_args(&url, &start_at, fixture.to_str().unwrap(), &[]);
    let pvc = args.iter().position(|a| *a == "--pvc").unwrap();
    args.drain(pvc..pvc + 4); // --pvc CLAIM --mount-path PATH
    let store_flags = [
        "--results-url",
        "s3://runs/k8s",
        "--env",
        &endpoint,
        "--env",
        &region,
        "--env",
        &allow,
        "--secret-env",
        "AWS_ACCESS_KEY_ID=s3:id",
        "--secret-env",
        "AWS_SECRET_ACCESS_KEY=s3:secret",
        "--service-account",
        "bench-writer",
    ];
    args.splice(pvc..pvc, store_flags);
    let out = run(&args).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains(&s3.secret_access_key));
    let job: Job = serde_json::from_str(&text).expect("a batch/v1 Job");
    speedbench_kube::check_job(&job).unwrap();
    // And by Kubernetes's own schema, independently of speedbench's checks.
    speedbench_test_support::kube::assert_valid_manifests(&[&text]);
    let value: Value = serde_json::from_str(&text).unwrap();
    let pod = &value["spec"]["template"]["spec"];
    assert!(pod.get("volumes").is_none(), "{pod}");
    assert_eq!(pod["serviceAccountName"], "bench-writer");
    let c = &pod["containers"][0];
    assert!(c.get("volumeMounts").is_none(), "{c}");
    let c_env = c["env"].as_array().unwrap();
    let named = |n: &str| c_env.iter().find(|e| e["name"] == n).unwrap().clone();
    assert_eq!(named("AWS_REGION")["value"], s3.region.as_str());
    assert_eq!(
        named("AWS_SECRET_ACCESS_KEY")["valueFrom"]["secretKeyRef"]["name"],
        "s3"
    );

    let mut handles = Vec::new();
    for index in 0..SHARDS {
        let args = pod_args(&job, index);
        let at = args
            .iter()
            .position(|a| a == "--output-artifact-dir")
            .unwrap();
        assert_eq!(
            args[at + 1],
            format!("s3://runs/k8s/bench-k8s/shard{index}of{SHARDS}")
        );
        let mut cmd = bin();
        // The Pod's environment: the plain env from the manifest, the
        // Secrets' values from the kubelet.
        for e in c_env {
            if let Some(v) = e["value"].as_str() {
                cmd.env(e["name"].as_str().unwrap(), v);
            }
        }
        cmd.env("AWS_ACCESS_KEY_ID", &s3.access_key_id)
            .env("AWS_SECRET_ACCESS_KEY", &s3.secret_access_key)
            .env("OPENAI_API_KEY", "placeholder")
            .args(&args);
        handles.push(tokio::spawn(async move {
            cmd.output().await.expect("the binary runs")
        }));
    }
    for h in handles {
        let out = h.await.unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("uploaded 4 objects"),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(server.ground_truth().requests, REQUESTS);
    server.shutdown().await;

    let mut report = bin();
    for (k, v) in &env {
        report.env(k, v);
    }
    let out = report
        .args(["report", "s3://runs/k8s/bench-k8s", "--format", "json"])
        .output()
        .await
        .unwrap();
    assert_one_merged_run(&out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_cluster_or_profile_would_reject_prints_no_manifest() {
    let input = "rows.jsonl";
    let url = "http://vllm:8000";
    let at = "4000000000"; // 2096: always in the future
    // Each case: extra manifest flags, profile flags, and what stderr must
    // say; no case may echo the credential.
    let cases: Vec<(Vec<&str>, Vec<&str>, &str)> = vec![
        (
            vec!["--secret-env", "OPENAI_API_KEY=sk-live-123"],
            vec![],
            "would put a credential in the manifest as a literal value",
        ),
        (
            vec![],
            vec!["--api-key", "sk-live-123"],
            "profile flag --api-key cannot be given here",
        ),
        (
            vec![],
            vec!["-H", "Authorization:Bearer sk-live-123"],
            "header Authorization would put a credential in the manifest",
        ),
        (
            vec![],
            vec!["--no-such-flag"],
            "not ones `speedbench profile` accepts: unexpected argument '--no-such-flag'",
        ),
        (
            vec![],
            vec!["--shard", "0/3"],
            "profile flag --shard cannot be given here",
        ),
        (
            vec![],
            vec!["--concurrency", "2"],
            "--concurrency 2 is split over 3 shards",
        ),
        (
            vec!["--name", "Bench_K8s"],
            vec![],
            "metadata.name \"Bench_K8s\"",
        ),
        (
            vec!["--namespace", "perf.team"],
            vec![],
            "metadata.namespace \"perf.team\"",
        ),
        (
            vec!["--request", "ephemeral-storage=2GB"],
            vec![],
            "resources.requests.ephemeral-storage \"2GB\" is not a Kubernetes quantity",
        ),
        (
            vec!["--limit", "cpu=1"],
            vec![],
            "resources.requests.cpu \"2\" is more than its limit 1",
        ),
        (
            vec!["--secret-env", "HF_TOKEN=hf:other"],
            vec![],
            "env \"HF_TOKEN\" is given twice",
        ),
        (
            vec!["--secret-env", "9KEY=s:k"],
            vec![],
            "environment variable name",
        ),
        (
            vec!["--label", "tier=-x"],
            vec![],
            "metadata.labels tier \"-x\"",
        ),
        (vec!["--pvc", "Results"], vec![], "claimName \"Results\""),
        (vec!["--start-at", "1000"], vec![], "--start-at: 1000 is"),
        (
            vec!["--results-url", "s3://runs/x"],
            vec![],
            "'--pvc <CLAIM>' cannot be used with '--results-url <URL>'",
        ),
        (
            vec!["--env", "AWS_SECRET_ACCESS_KEY=sk-live-123"],
            vec![],
            "env AWS_SECRET_ACCESS_KEY would put a credential in the manifest",
        ),
        (
            vec!["--env", "AWS_REGION"],
            vec![],
            "--env: \"AWS_REGION\" is not NAME=VALUE",
        ),
        (
            vec!["--service-account", "Bench"],
            vec![],
            "serviceAccountName \"Bench\"",
        ),
        // Literal credentials wherever they sit (issue #22, point 10).
        (
            vec![],
            vec!["--url", "http://bench:sk-live-123@vllm:8000"],
            "a URL with a user:password (--url) would put a credential",
        ),
        (
            vec![],
            vec![
                "--server-metrics",
                "http://vllm:8000/metrics?api-key=sk-live-123",
            ],
            "a URL with a api-key query parameter",
        ),
        (
            vec![],
            vec!["--extra-inputs", "api_key:sk-live-123"],
            "the value of api_key (--extra-inputs)",
        ),
        (
            vec![],
            vec!["-H", "Cookie:session=sk-live-123"],
            "header Cookie would put a credential",
        ),
        (
            vec!["--env", "NOTE=sk-live-123456789abcdefghij"],
            vec![],
            "env NOTE (a key-shaped value) would put a credential in the manifest",
        ),
        // The next round's literals (issue #34, point 5): nested and Hub
        // fields, token-shaped values in any header, environment names
        // read word by word, a header in an environment value, a literal
        // given to --secret-env.
        (
            vec![],
            vec![
                "--extra-inputs",
                r#"{"metadata":{"api_key":"sk-live-123"}}"#,
            ],
            "the request field metadata.api_key",
        ),
        (
            vec![],
            vec!["--extra-inputs", "hf_token:sk-live-123"],
            "the value of hf_token (--extra-inputs)",
        ),
        (
            vec![],
            vec!["-H", "X-Custom: Bearer sk-live-123"],
            "header X-Custom would put a credential",
        ),
        (
            vec![],
            vec![
                "-H",
                "X-Custom: eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sk-live-123",
            ],
            "header X-Custom would put a credential",
        ),
        (
            vec!["--env", "AWS_CREDS=sk-live-123"],
            vec![],
            "env AWS_CREDS would put",
        ),
        (
            vec!["--env", "HF_TKN=sk-live-123"],
            vec![],
            "env HF_TKN would put",
        ),
        (
            vec!["--env", "PASS=sk-live-123"],
            vec![],
            "env PASS would put",
        ),
        (
            vec!["--env", "DB_PWD=sk-live-123"],
            vec![],
            "env DB_PWD would put",
        ),
        (
            vec!["--env", "EXTRA_HEADER=Authorization: Bearer sk-live-123"],
            vec![],
            "env EXTRA_HEADER (the value of Authorization) would put",
        ),
        (
            vec!["--secret-env", "sk-live-123"],
            vec![],
            "give ENV=SECRET:KEY",
        ),
        (
            vec!["--secret-env", "HF_TOKEN=sk-live-123:Not/A_Key"],
            vec![],
            "secret env HF_TOKEN would put a credential",
        ),
        // A load no Pod's process can hold, quantities the API server
        // would cap, a controller's label.
        (
            vec!["--limit", "nvidia.com/gpu=9Ei"],
            vec![],
            "is too large",
        ),
        (vec!["--limit", "cpu=1e16"], vec![], "is too large"),
        (
            vec!["--label", "pod-template-hash=x"],
            vec![],
            "is reserved",
        ),
        // Exactly profile's own checks of every Pod's flags.
        (
            vec![],
            vec!["--timeout", "0"],
            "would be refused by every Pod: --timeout: must be a positive number of seconds",
        ),
        (
            vec![],
            vec!["--url", "htp://vllm:8000"],
            "would be refused by every Pod: --url",
        ),
        (
            vec![],
            vec!["--request-count", "0"],
            "counts must be at least 1",
        ),
        // Labels the API server sets on a Job's Pods itself.
        (vec!["--label", "job-name=x"], vec![], "is reserved"),
        (
            vec!["--label", "batch.kubernetes.io/controller-uid=x"],
            vec![],
            "is reserved",
        ),
    ];
    for (extra, profile, want) in cases {
        let mut args = manifest_args(url, at, input, &[]);
        // A second --name/--namespace/--pvc/--start-at would be a repeated
        // flag: swap the value.
        let mut extra = extra.clone();
        for flag in ["--name", "--namespace", "--pvc", "--start-at"] {
            if extra.first() == Some(&flag) {
                let i = args.iter().position(|a| *a == flag).unwrap();
                args[i + 1] = extra[1];
                extra.clear();
            }
        }
        let dash = args.iter().position(|a| *a == "--").unwrap();
        for (k, e) in extra.iter().enumerate() {
            args.insert(dash + k, e);
        }
        // A profile flag already given (--concurrency) gets the new value;
        // others replace the last pair.
        let dash = args.iter().position(|a| *a == "--").unwrap();
        match args[dash..].iter().position(|a| Some(a) == profile.first()) {
            Some(i) if profile.len() == 2 => args[dash + i + 1] = profile[1],
            _ if !profile.is_empty() => {
                let n = args.len();
                args.truncate(n - 2);
                args.extend(profile.iter().copied());
            }
            _ => {}
        }
        let out = run(&args).await;
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(out.stdout.is_empty(), "{args:?} printed a manifest");
        assert!(
            stderr(&out).contains(want),
            "{args:?}: {} lacks {want:?}",
            stderr(&out)
        );
        assert!(
            !stderr(&out).contains("sk-live-123"),
            "{args:?} echoed the credential: {}",
            stderr(&out)
        );
    }
    // A load no Pod's process can hold: 10^8 requests in flight for 3 s
    // over 3 shards, past what any Linux process opens by default.
    let mut args = manifest_args(url, at, input, &[]);
    let count = args.iter().position(|a| *a == "--request-count").unwrap();
    args.splice(count..count + 2, ["--benchmark-duration", "3"]);
    let c = args.iter().position(|a| *a == "--concurrency").unwrap();
    args[c + 1] = "100000000";
    let out = run(&args).await;
    assert!(!out.status.success() && out.stdout.is_empty(), "{args:?}");
    assert!(
        stderr(&out).contains("would be refused by every Pod")
            && stderr(&out).contains("33333334 requests in flight per process"),
        "{}",
        stderr(&out)
    );
    // Where the shards write: exactly one of a claim and a store URL, and
    // a URL speedbench can upload to.
    let without_claim = |extra: &[&'static str]| {
        let mut args = manifest_args(url, at, input, &[]);
        let pvc = args.iter().position(|a| *a == "--pvc").unwrap();
        args.drain(pvc..pvc + 4);
        args.splice(pvc..pvc, extra.iter().copied());
        args
    };
    for (extra, want) in [
        (
            &[][..],
            "the following required arguments were not provided",
        ),
        (
            &["--results-url", "ftp://runs/x"][..],
            "--results-url: ftp://runs/x: unsupported scheme",
        ),
        (
            &["--results-url", "s3://runs", "--mount-path", "/r"][..],
            "--pvc",
        ),
    ] {
        let args = without_claim(extra);
        let out = run(&args).await;
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(out.stdout.is_empty(), "{args:?} printed a manifest");
        assert!(
            stderr(&out).contains(want),
            "{args:?}: {} lacks {want:?}",
            stderr(&out)
        );
    }
}

/// Every option of `kube manifest` in some manifest, each checked by
/// Kubernetes 1.33's schema (strict: an unknown or misplaced field fails).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_variant_of_the_manifest_meets_kubernetes_own_schema() {
    let profile = [
        "--url",
        "http://vllm:8000",
        "-m",
        "m",
        "--bench",
        "qualitative",
        "--concurrency",
        "64",
    ];
    let base = [
        "kube",
        "manifest",
        "--name",
        "bench1",
        "--image",
        "registry.example/speedbench:0.1.0",
        "--shards",
        "4",
        "--start-in",
        "120",
    ];
    let variants: Vec<Vec<&str>> = vec![
        vec!["--pvc", "results"],
        vec![
            "--pvc",
            "results",
            "--mount-path",
            "/data",
            "--namespace",
            "perf",
            "--spread",
            "required",
        ],
        vec![
            "--results-url",
            "s3://bench/k8s",
            "--env",
            "AWS_REGION=eu-west-1",
            "--secret-env",
            "AWS_ACCESS_KEY_ID=s3:id",
            "--secret-env",
            "AWS_SECRET_ACCESS_KEY=s3:secret",
            "--service-account",
            "bench-writer",
            "--spread",
            "preferred",
        ],
        vec![
            "--pvc",
            "results",
            "--request",
            "cpu=500m",
            "--request",
            "memory=1Gi",
            "--limit",
            "memory=2Gi",
            "--request",
            "nvidia.com/gpu=1",
            "--limit",
            "nvidia.com/gpu=1",
            "--label",
            "team=serving",
            "--active-deadline",
            "7200",
            "--secret-env",
            "OPENAI_API_KEY=llm-api:key",
            "--secret-env",
            "HF_TOKEN=hf:token",
        ],
    ];
    let mut texts = Vec::new();
    for extra in &variants {
        let mut args: Vec<&str> = base.to_vec();
        args.extend(extra);
        args.push("--");
        args.extend(profile);
        let out = run(&args).await;
        assert!(out.status.success(), "{extra:?}: {}", stderr(&out));
        texts.push(String::from_utf8(out.stdout).unwrap());
    }
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    speedbench_test_support::kube::assert_valid_manifests(&texts);
}
