//! `speedbench kube manifest`: print the Kubernetes Indexed Job of a
//! sharded run (docs/distributed.md, "Running on Kubernetes"). The Job is
//! built and checked by `speedbench_kube`; this module maps the flags and
//! checks that every Pod's arguments are ones `speedbench profile` accepts.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, Subcommand, ValueEnum};
use speedbench_kube::{
    PullPolicy, PvcOutput, Resources, ResultsOutput, SecretEnv, ShardedJob, Spread, build_job,
    expanded_args,
};

use crate::{Cli, CliError, Command, Context, Outcome, fail};

/// Options of `speedbench kube`.
#[derive(Args, Debug)]
pub(crate) struct KubeArgs {
    #[command(subcommand)]
    command: KubeCommand,
}

#[derive(Subcommand, Debug)]
enum KubeCommand {
    /// Print the Indexed Job (JSON, as `kubectl apply -f -` takes it) that
    /// runs `speedbench profile` as N shards, one Pod each, with one start.
    Manifest(Box<ManifestArgs>),
}

/// `--image-pull-policy`.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum PullPolicyArg {
    Always,
    IfNotPresent,
    Never,
}

/// `--spread`.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum SpreadArg {
    /// No constraint.
    None,
    /// Over nodes where possible (ScheduleAnyway).
    Preferred,
    /// Over nodes or wait (DoNotSchedule).
    Required,
}

/// Options of `speedbench kube manifest`.
#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("results").required(true).args(["pvc", "results_url"]))]
struct ManifestArgs {
    /// The Job's name (an RFC 1123 label); Pods are NAME-INDEX.
    #[arg(long)]
    name: String,
    /// The namespace.
    #[arg(long, default_value = "default")]
    namespace: String,
    /// The container image holding the speedbench binary.
    #[arg(long)]
    image: String,
    /// imagePullPolicy; the cluster's default when omitted.
    #[arg(long, value_enum)]
    image_pull_policy: Option<PullPolicyArg>,
    /// The command that starts speedbench in the image.
    #[arg(long, default_value = "speedbench")]
    command: String,
    /// The shard count N: N Pods at once (completions = parallelism = N).
    #[arg(long, value_name = "N")]
    shards: u32,
    /// The --run-id every shard records under; default: the Job's name.
    #[arg(long)]
    run_id: Option<String>,
    /// The shared start of the measured phase, Unix seconds; default: now
    /// plus --start-in, computed once here.
    #[arg(long, value_name = "UNIX_TIME", conflicts_with = "start_in")]
    start_at: Option<f64>,
    /// Seconds from now to the shared start: time enough to apply the Job,
    /// schedule every Pod and pull the image.
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    start_in: u64,
    /// A resource request NAME=QUANTITY (cpu=2, memory=4Gi); repeatable.
    #[arg(long = "request", value_name = "NAME=QTY")]
    requests: Vec<String>,
    /// A resource limit NAME=QUANTITY (memory=8Gi, nvidia.com/gpu=1); repeatable.
    #[arg(long = "limit", value_name = "NAME=QTY")]
    limits: Vec<String>,
    /// An environment variable from a Secret: ENV=SECRET:KEY
    /// (OPENAI_API_KEY=llm-api:key, HF_TOKEN=hf:token); repeatable. A literal
    /// value is refused.
    #[arg(long = "secret-env", value_name = "ENV=SECRET:KEY")]
    secret_env: Vec<String>,
    /// The PersistentVolumeClaim the shards write to (ReadWriteMany when
    /// the Pods may land on several nodes).
    #[arg(long, value_name = "CLAIM")]
    pvc: Option<String>,
    /// Where the claim is mounted; shard I writes MOUNT/RUN_ID/shardIofN.
    #[arg(long, default_value = "/results", conflicts_with = "results_url")]
    mount_path: String,
    /// Instead of a claim, an object-store prefix (s3://bucket/prefix,
    /// gs://..., az://...): shard I uploads to URL/RUN_ID/shardIofN; give
    /// the store's credentials with --secret-env (or --service-account)
    /// and its endpoint or region with --env.
    #[arg(long, value_name = "URL", conflicts_with = "pvc")]
    results_url: Option<String>,
    /// A plain environment variable NAME=VALUE of every Pod (AWS_REGION,
    /// AWS_ENDPOINT_URL, ...); repeatable. A credential-like name is
    /// refused: use --secret-env.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// The Pods' service account (a store reached through workload
    /// identity: IRSA, GKE or Azure workload identity).
    #[arg(long, value_name = "NAME")]
    service_account: Option<String>,
    /// A label KEY=VALUE on the Job and its Pods; repeatable.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    labels: Vec<String>,
    /// Spread the Pods over nodes: none, preferred or required.
    #[arg(long, value_enum, default_value = "none")]
    spread: SpreadArg,
    /// activeDeadlineSeconds: stop the Job after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    active_deadline: Option<u32>,
    /// The `speedbench profile` flags of the run, after `--`, as an
    /// unsharded run takes them (the manifest adds --shard-count,
    /// --shard-index, --run-id, --start-at and --output-artifact-dir).
    #[arg(last = true, required = true, value_name = "PROFILE FLAGS")]
    profile_args: Vec<String>,
}

/// `NAME=VALUE` pairs of a repeatable flag; a name given twice is refused.
fn pairs(flag: &str, values: &[String]) -> Result<BTreeMap<String, String>, CliError> {
    speedbench_kube::parse_pairs(values).map_err(|e| fail(flag, e))
}

/// The claim or the store prefix the shards write to; a URL is parsed as
/// `profile` will parse it.
fn results_output(
    pvc: Option<String>,
    mount_path: String,
    url: Option<String>,
) -> Result<ResultsOutput, CliError> {
    match (pvc, url) {
        (Some(claim), None) => Ok(ResultsOutput::Pvc(PvcOutput { claim, mount_path })),
        (None, Some(url)) => {
            url.parse::<speedbench_store::StoreUrl>()
                .context("--results-url")?;
            Ok(ResultsOutput::Store { url })
        }
        _ => Err(fail("kube manifest", "give one of --pvc and --results-url")),
    }
}

/// Runs `speedbench kube`.
pub(crate) fn run(args: KubeArgs) -> Result<Outcome, CliError> {
    match args.command {
        KubeCommand::Manifest(m) => manifest(*m),
    }
}

fn manifest(args: ManifestArgs) -> Result<Outcome, CliError> {
    let start_at_unix = start_time(args.start_at, args.start_in)?;
    let when = match args.start_at {
        Some(_) => "as given".to_string(),
        None => format!("{} s from now", args.start_in + 1),
    };
    let input = sharded_job(args, start_at_unix)?;
    let job = build_job(&input).context("kube manifest")?;
    // What the first and the last Pod will run, parsed by `profile`'s own
    // definition: a flag it does not take fails here, not in the cluster.
    for index in [0, input.shards - 1] {
        check_pod_args(&expanded_args(&job, index, "secret"), input.shards)?;
    }
    let text = serde_json::to_string_pretty(&job).context("kube manifest: writing JSON")?;
    println!("{text}");
    eprintln!(
        "kube manifest: {} shards of run {}; every shard starts its measured phase at Unix \
         time {start_at_unix} ({when}); apply the Job before then",
        input.shards, input.run_id,
    );
    Ok(Outcome::Done)
}

/// The shared start (`speedbench_kube::shared_start`) from now.
fn start_time(start_at: Option<f64>, start_in: u64) -> Result<f64, CliError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| fail("--start-in", format!("the clock is before 1970: {e}")))?;
    speedbench_kube::shared_start(start_at, start_in, now.as_secs_f64())
        .map_err(|e| fail("--start-at", e))
}

/// The Job these flags describe.
fn sharded_job(args: ManifestArgs, start_at_unix: f64) -> Result<ShardedJob, CliError> {
    let secrets = args
        .secret_env
        .iter()
        .map(|s| s.parse::<SecretEnv>())
        .collect::<Result<Vec<_>, _>>()
        .context("--secret-env")?;
    Ok(ShardedJob {
        run_id: args.run_id.clone().unwrap_or_else(|| args.name.clone()),
        name: args.name,
        namespace: args.namespace,
        image: args.image,
        image_pull_policy: args.image_pull_policy.map(|p| match p {
            PullPolicyArg::Always => PullPolicy::Always,
            PullPolicyArg::IfNotPresent => PullPolicy::IfNotPresent,
            PullPolicyArg::Never => PullPolicy::Never,
        }),
        command: vec![args.command],
        shards: args.shards,
        profile_args: args.profile_args,
        start_at_unix,
        resources: Resources {
            requests: pairs("--request", &args.requests)?,
            limits: pairs("--limit", &args.limits)?,
        },
        secrets,
        output: results_output(args.pvc, args.mount_path, args.results_url)?,
        env: pairs("--env", &args.env)?,
        service_account: args.service_account,
        labels: pairs("--label", &args.labels)?,
        spread: match args.spread {
            SpreadArg::None => Spread::None,
            SpreadArg::Preferred => Spread::Preferred,
            SpreadArg::Required => Spread::Required,
        },
        active_deadline_seconds: args.active_deadline,
    })
}

/// Parses one Pod's `speedbench` arguments with the binary's own flags and
/// refuses a load too small to split over the shards.
fn check_pod_args(args: &[String], shards: u32) -> Result<(), CliError> {
    let argv = std::iter::once("speedbench".to_string()).chain(args.iter().cloned());
    let cli = Cli::try_parse_from(argv).map_err(|e| {
        fail(
            "kube manifest",
            format!(
                "the profile flags after -- are not ones `speedbench profile` accepts: {}",
                e.render().to_string().trim().trim_start_matches("error: ")
            ),
        )
    })?;
    let Command::Profile(profile) = cli.command else {
        return Err(fail(
            "kube manifest",
            "the Pod's arguments do not run `speedbench profile`",
        ));
    };
    // Exactly `profile`'s own checks of the values (a zero timeout, a URL
    // it cannot use, a start in milliseconds), but for the files only the
    // Pod has.
    profile.spec.validate_portable().map_err(|e| {
        fail(
            "kube manifest",
            format!("the profile flags after -- would be refused by every Pod: {e}"),
        )
    })?;
    let shards = shards as usize;
    if profile.spec.load.request_rate.is_none() && profile.spec.load.concurrency < shards {
        return Err(fail(
            "kube manifest",
            format!(
                "--concurrency {} is split over {shards} shards and leaves some with none; \
                 give at least {shards}",
                profile.spec.load.concurrency
            ),
        ));
    }
    if let Some(m) = profile.spec.load.max_concurrency
        && m < shards
    {
        return Err(fail(
            "kube manifest",
            format!(
                "--max-concurrency {m} is split over {shards} shards and leaves some with none"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest_args(extra: &[&str]) -> Vec<String> {
        [
            "speedbench",
            "kube",
            "manifest",
            "--name",
            "bench1",
            "--image",
            "speedbench:0.1",
            "--shards",
            "3",
            "--start-at",
            "1800000000",
            "--pvc",
            "results",
            "--",
            "--url",
            "http://vllm:8000",
            "--bench",
            "qualitative",
            "--concurrency",
            "6",
        ]
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .collect()
    }

    #[test]
    fn every_pods_arguments_parse_as_profile_flags() {
        let cli = Cli::try_parse_from(manifest_args(&[])).unwrap();
        let Command::Kube(k) = cli.command else {
            panic!("not kube")
        };
        let KubeCommand::Manifest(m) = k.command;
        let input = ShardedJob {
            name: m.name.clone(),
            namespace: m.namespace.clone(),
            image: m.image.clone(),
            image_pull_policy: None,
            command: vec![m.command.clone()],
            shards: m.shards,
            run_id: m.name.clone(),
            profile_args: m.profile_args.clone(),
            start_at_unix: m.start_at.unwrap(),
            resources: Resources::default(),
            secrets: vec![],
            output: results_output(m.pvc.clone(), m.mount_path.clone(), None)
                .unwrap_or_else(|e| panic!("{e}")),
            env: BTreeMap::new(),
            service_account: None,
            labels: BTreeMap::new(),
            spread: Spread::None,
            active_deadline_seconds: None,
        };
        let job = build_job(&input).unwrap();
        for index in 0..3 {
            let args = expanded_args(&job, index, "secret");
            let cli =
                Cli::try_parse_from(std::iter::once("speedbench".to_string()).chain(args)).unwrap();
            let Command::Profile(p) = cli.command else {
                panic!("not profile")
            };
            assert_eq!(p.spec.shard.shard_count, Some(3));
            assert_eq!(p.spec.shard.shard_index, Some(index));
            assert_eq!(p.spec.shard.start_at, Some(1_800_000_000.0));
            assert_eq!(p.spec.outputs.run_id.as_deref(), Some("bench1"));
            assert_eq!(p.spec.load.concurrency, 6);
            assert_eq!(
                p.spec.outputs.output_artifact_dir.unwrap(),
                std::path::PathBuf::from(format!("/results/bench1/shard{index}of3"))
            );
        }
    }

    #[test]
    fn flags_profile_does_not_take_and_loads_too_small_are_refused() {
        let Err(bad) = check_pod_args(&["profile".into(), "--no-such-flag".into()], 2) else {
            panic!("accepted")
        };
        assert!(bad.to_string().contains("--no-such-flag"), "{bad}");
        let small = [
            "profile",
            "--input-file",
            "rows.jsonl",
            "--concurrency",
            "2",
        ]
        .map(String::from);
        assert!(check_pod_args(&small, 2).is_ok());
        let Err(e) = check_pod_args(&small, 3) else {
            panic!("accepted")
        };
        assert!(e.to_string().contains("--concurrency 2"), "{e}");
        let open = [
            "profile",
            "--input-file",
            "rows.jsonl",
            "--request-rate",
            "5",
            "--max-concurrency",
            "2",
        ]
        .map(String::from);
        let Err(e) = check_pod_args(&open, 3) else {
            panic!("accepted")
        };
        assert!(e.to_string().contains("--max-concurrency 2"), "{e}");
    }

    #[test]
    fn repeated_pairs_are_refused() {
        let Err(e) = pairs("--request", &["cpu=1".into(), "cpu=2".into()]) else {
            panic!("accepted")
        };
        assert!(e.to_string().contains("cpu is given twice"));
        assert!(pairs("--label", &["novalue".into()]).is_err());
    }
}
