//! Kubernetes manifests for sharded speedbench runs (docs/distributed.md,
//! "Running on Kubernetes").
//!
//! [`build_job`] turns a [`ShardedJob`] into a `batch/v1` Indexed Job, built
//! with the typed structs of `k8s-openapi`: one Pod per shard
//! (`completions = parallelism = shards`), each running `speedbench profile`
//! with the caller's flags plus `--shard-count N --shard-index I` (I from the
//! Pod's completion index), one `--run-id`, one `--start-at` shared by every
//! Pod, and its own `--output-artifact-dir`: a directory on a
//! PersistentVolumeClaim, or a URL under an object-store prefix.
//! Credentials reach the Pods only as `secretKeyRef` environment variables:
//! a literal credential is refused.
//!
//! [`check_job`] is the API server's validation of the fields such a Job
//! sets (names, labels, quantities, environment, Secret references, the
//! Indexed-Job rules); [`build_job`] runs it on what it built, and a Job read
//! back from JSON can be checked the same way.
//!
//! This crate enables no Kubernetes version feature of `k8s-openapi` (the
//! final binary picks one, as k8s-openapi asks; speedbench's picks `v1_33`).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ObjectFieldSelector, PersistentVolumeClaimVolumeSource,
    PodSpec, PodTemplateSpec, ResourceRequirements, SecretKeySelector, TopologySpreadConstraint,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

pub mod validate;

use speedbench_credentials::{header_credential, is_credential_name, literal_credential};

/// The Pod annotation an Indexed Job sets to the Pod's completion index.
pub const COMPLETION_INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";
/// The environment variable the manifest declares from
/// [`COMPLETION_INDEX_ANNOTATION`]; the container's arguments refer to it as
/// `$(SPEEDBENCH_SHARD_INDEX)`, which the kubelet expands.
pub const SHARD_INDEX_ENV: &str = "SPEEDBENCH_SHARD_INDEX";
/// The name of the one container of every Pod.
pub const CONTAINER_NAME: &str = "speedbench";
/// The name of the results volume (the PersistentVolumeClaim).
pub const RESULTS_VOLUME: &str = "results";
/// The label naming the run (`--run-id`) on the Job and on every Pod.
pub const RUN_ID_LABEL: &str = "speedbench.dev/run-id";
/// The label naming the Job on every Pod (the spread constraint selects it).
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
/// The label naming the application on the Job and on every Pod.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
/// The most Pods an Indexed Job may run at once (the API server's limit on
/// `parallelism` in Indexed mode).
pub const MAX_SHARDS: u32 = 100_000;

/// `speedbench profile` flags the manifest sets itself, so a caller's
/// profile flags may not: each with why.
pub const RESERVED_FLAGS: &[(&str, &str)] = &[
    (
        "--shard",
        "the manifest gives --shard-count and --shard-index",
    ),
    ("--shard-count", "the manifest sets it from the shard count"),
    (
        "--shard-index",
        "the manifest sets it from the Pod's completion index",
    ),
    ("--run-id", "the manifest sets it from the run id"),
    (
        "--start-at",
        "the manifest sets one start time for every Pod",
    ),
    (
        "--start-after-barrier",
        "the manifest sets one --start-at for every Pod",
    ),
    (
        "--output-artifact-dir",
        "the manifest gives each shard its own directory (--pvc) or URL (--results-url)",
    ),
    (
        "--overwrite",
        "each shard's directory is new; overwriting could replace an earlier run's results",
    ),
    (
        "--output",
        "every Pod would write the same file; run `speedbench report` over the shards instead",
    ),
    (
        "--api-key",
        "a literal key would sit in the manifest; give the key as a Secret reference \
         (OPENAI_API_KEY from a secretKeyRef)",
    ),
    (
        "--config",
        "a sweep is not sharded; make one Job per variation",
    ),
    ("--dry-run", "only used with --config"),
];

/// Why a manifest could not be built, or which field of a Job a cluster
/// would reject.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// A field's value breaks the API server's rule for it.
    #[error("{field} {value:?} {reason}")]
    Invalid {
        /// The field, as the manifest names it (`metadata.name`, ...).
        field: String,
        /// The value given.
        value: String,
        /// The rule it breaks.
        reason: String,
    },
    /// A required field is empty or missing.
    #[error("{field} is required: {reason}")]
    Missing {
        /// The field.
        field: String,
        /// What to give.
        reason: String,
    },
    /// A profile flag the manifest sets itself.
    #[error("profile flag {flag} cannot be given here: {reason}")]
    ReservedFlag {
        /// The flag as given.
        flag: String,
        /// Why, and what sets it instead.
        reason: String,
    },
    /// A credential given as a literal value instead of a Secret reference.
    #[error(
        "{what} would put a credential in the manifest as a literal value; give it as a \
         Secret reference instead ({hint})"
    )]
    LiteralSecret {
        /// Where the literal was.
        what: String,
        /// How to reference a Secret instead.
        hint: String,
    },
    /// Two environment variables (or two of anything unique) of one name.
    #[error("{field} {name:?} is given twice")]
    Duplicate {
        /// The list.
        field: String,
        /// The repeated name.
        name: String,
    },
}

/// The Unix time every shard starts its measured phase at: `start_at`
/// (refused when already past at `now`: every Pod would begin whenever it
/// is scheduled, no shared start at all), or whole seconds `start_in` after
/// the next second, readable by people and by `date -d @T`.
///
/// ```
/// assert_eq!(speedbench_kube::shared_start(None, 60, 1000.4), Ok(1061.0));
/// assert_eq!(speedbench_kube::shared_start(Some(2000.5), 60, 1000.4), Ok(2000.5));
/// assert!(speedbench_kube::shared_start(Some(900.0), 60, 1000.4).is_err());
/// ```
pub fn shared_start(start_at: Option<f64>, start_in: u64, now: f64) -> Result<f64, String> {
    match start_at {
        Some(t) if t <= now => Err(format!(
            "{t} is {:.0} s in the past; give a time after the Job's Pods will be running, or \
             --start-in SECONDS",
            now - t
        )),
        Some(t) => Ok(t),
        None => Ok((now.floor() as u64 + 1 + start_in) as f64),
    }
}

/// `NAME=VALUE` pairs (a repeatable flag's: `--env`, `--label`,
/// `--request`); a value without `=`, or a name given twice, is refused.
///
/// ```
/// let p = speedbench_kube::parse_pairs(&["cpu=2".into(), "memory=4Gi".into()]).unwrap();
/// assert_eq!(p["memory"], "4Gi");
/// assert!(speedbench_kube::parse_pairs(&["cpu=1".into(), "cpu=2".into()]).is_err());
/// ```
pub fn parse_pairs(values: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for v in values {
        let Some((k, val)) = v.split_once('=') else {
            return Err(format!("{v:?} is not NAME=VALUE"));
        };
        if out.insert(k.to_string(), val.to_string()).is_some() {
            return Err(format!("{k} is given twice"));
        }
    }
    Ok(out)
}

fn invalid(field: &str, value: impl ToString, reason: impl Into<String>) -> KubeError {
    KubeError::Invalid {
        field: field.to_string(),
        value: validate::shown_value(&value.to_string()),
        reason: reason.into(),
    }
}

/// `imagePullPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullPolicy {
    /// Pull on every Pod start.
    Always,
    /// Pull when the node lacks the image.
    IfNotPresent,
    /// Never pull.
    Never,
}

impl PullPolicy {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}

/// How the Pods are spread over nodes (each node is one client source
/// address; a node's connection limits are per source IP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Spread {
    /// No constraint: the scheduler may put several shards on one node.
    #[default]
    None,
    /// Spread over nodes where it can (`whenUnsatisfiable: ScheduleAnyway`).
    Preferred,
    /// One more shard on a node than on another only if unavoidable; Pods
    /// that cannot be placed so wait (`whenUnsatisfiable: DoNotSchedule`).
    Required,
}

/// One environment variable taken from a key of a Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretEnv {
    /// The variable (`OPENAI_API_KEY`, `HF_TOKEN`, ...).
    pub env: String,
    /// The Secret's name, in the Job's namespace.
    pub secret: String,
    /// The key within the Secret.
    pub key: String,
}

impl std::str::FromStr for SecretEnv {
    type Err = KubeError;

    /// `ENV=SECRET:KEY`. A value without `SECRET:KEY` (a literal) is refused.
    fn from_str(text: &str) -> Result<Self, KubeError> {
        let Some((env, reference)) = text.split_once('=') else {
            // Not echoed: without `=` it may be the credential itself.
            return Err(KubeError::Missing {
                field: "secret env".into(),
                reason: "give ENV=SECRET:KEY (e.g. OPENAI_API_KEY=llm-api:key); the value \
                         given is not shown"
                    .into(),
            });
        };
        let Some((secret, key)) = reference.split_once(':') else {
            return Err(KubeError::LiteralSecret {
                what: format!("secret env {env}"),
                hint: format!(
                    "{env}=SECRET:KEY names the Secret and its key, e.g. \
                     `kubectl create secret generic llm-api --from-literal=key=...` then \
                     {env}=llm-api:key"
                ),
            });
        };
        let parsed = SecretEnv {
            env: env.to_string(),
            secret: secret.to_string(),
            key: key.to_string(),
        };
        validate::env_name("secret env name", env)?;
        // A SECRET:KEY that is not one is most likely a literal with a
        // colon in it: said, never echoed.
        parsed.check().map_err(|_| KubeError::LiteralSecret {
            what: format!("secret env {env}"),
            hint: format!(
                "{env}=SECRET:KEY must name a Secret (a DNS subdomain) and one of its keys; \
                 the value given is not one and is not shown"
            ),
        })?;
        Ok(parsed)
    }
}

impl SecretEnv {
    fn check(&self) -> Result<(), KubeError> {
        validate::env_name("secret env name", &self.env)?;
        validate::dns_subdomain(&format!("secret name of {}", self.env), &self.secret)?;
        validate::secret_key(&format!("secret key of {}", self.env), &self.key)
    }
}

/// Resource requests and limits of the container, by resource name
/// (`cpu`, `memory`, `ephemeral-storage`, or an extended resource such as
/// `nvidia.com/gpu`) to a quantity (`2`, `500m`, `4Gi`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Resources {
    /// What the scheduler reserves.
    pub requests: BTreeMap<String, String>,
    /// The caps.
    pub limits: BTreeMap<String, String>,
}

/// A PersistentVolumeClaim mounted in every Pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PvcOutput {
    /// The claim's name, in the Job's namespace. With more than one node it
    /// must be `ReadWriteMany` (or every Pod on one node).
    pub claim: String,
    /// Where it is mounted in the container (absolute).
    pub mount_path: String,
}

/// Where the shards write. Shard `I` of `N` writes `BASE/RUN_ID/shardIofN`,
/// so after the Job `speedbench report BASE/RUN_ID` merges them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultsOutput {
    /// A claim's mount is `BASE`.
    Pvc(PvcOutput),
    /// An object-store prefix (`s3://bucket/prefix`, `gs://...`,
    /// `az://...`) is `BASE`: each shard stages its run in the container
    /// and uploads it (speedbench-store); no volume is mounted. The
    /// store's credentials come from Secret envs (`AWS_ACCESS_KEY_ID`,
    /// ...) or the Pod's service account (workload identity).
    Store {
        /// The prefix URL.
        url: String,
    },
}

impl ResultsOutput {
    /// `BASE`, without a trailing `/`.
    fn base(&self) -> &str {
        match self {
            ResultsOutput::Pvc(p) => p.mount_path.trim_end_matches('/'),
            ResultsOutput::Store { url } => url.trim_end_matches('/'),
        }
    }
}

/// Everything a sharded run's Job is made from.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardedJob {
    /// The Job's name (an RFC 1123 label; the Pods' hostnames are
    /// `NAME-INDEX`, which must fit 63 characters too).
    pub name: String,
    /// The namespace (an RFC 1123 label).
    pub namespace: String,
    /// The container image holding the `speedbench` binary.
    pub image: String,
    /// `imagePullPolicy`; the cluster's default when `None`.
    pub image_pull_policy: Option<PullPolicy>,
    /// The command that starts the binary (`["speedbench"]`).
    pub command: Vec<String>,
    /// The shard count N: one Pod per shard, all at once.
    pub shards: u32,
    /// `--run-id`, the group `speedbench report` merges by; also a label
    /// value and a directory name.
    pub run_id: String,
    /// The `speedbench profile` flags every shard runs with, as the
    /// unsharded run would take them (`--url`, `-m`, the dataset, the
    /// load). `$(NAME)` in them is expanded by the kubelet from the
    /// container's environment (e.g. a header built from a Secret env).
    pub profile_args: Vec<String>,
    /// The shared start of the measured phase, Unix seconds (`--start-at`).
    pub start_at_unix: f64,
    /// Resource requests and limits.
    pub resources: Resources,
    /// Environment variables from Secrets.
    pub secrets: Vec<SecretEnv>,
    /// Where the shards write.
    pub output: ResultsOutput,
    /// Plain environment variables (a store's endpoint or region, ...);
    /// a credential-like name (`*KEY*`, `*TOKEN*`, `*SECRET*`, ...) is
    /// refused: give it in [`ShardedJob::secrets`].
    pub env: BTreeMap<String, String>,
    /// `serviceAccountName` of the Pods (for a store reached through
    /// workload identity); the namespace's default when `None`.
    pub service_account: Option<String>,
    /// Extra labels on the Job and its Pods.
    pub labels: BTreeMap<String, String>,
    /// Spreading the Pods over nodes.
    pub spread: Spread,
    /// `activeDeadlineSeconds`: the Job is stopped after this long.
    pub active_deadline_seconds: Option<u32>,
}

/// The header name of a `-H`/`--header` value (`Name:value`).
fn header_name(value: &str) -> &str {
    value.split_once(':').map_or(value, |(n, _)| n).trim()
}

/// Refuses profile flags the manifest sets, and credentials in them given
/// as literals (`--api-key`, an `Authorization`-like header whose value is
/// not a `$(VAR)` reference to a Secret env).
fn check_profile_args(args: &[String], secrets: &[SecretEnv]) -> Result<(), KubeError> {
    if args.is_empty() {
        return Err(KubeError::Missing {
            field: "profile flags".into(),
            reason: "give the `speedbench profile` flags every shard runs with (--url, the \
                     dataset, the load)"
                .into(),
        });
    }
    if args.first().is_some_and(|a| a == "profile") {
        return Err(invalid(
            "profile flags",
            "profile",
            "give the flags only; the manifest runs `speedbench profile`",
        ));
    }
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let flag = arg.split_once('=').map_or(arg.as_str(), |(f, _)| f);
        if let Some((_, reason)) = RESERVED_FLAGS.iter().find(|(f, _)| *f == flag) {
            return Err(KubeError::ReservedFlag {
                flag: flag.to_string(),
                reason: (*reason).to_string(),
            });
        }
        let header = if flag == "--header" || flag == "-H" {
            match arg.split_once('=') {
                Some((_, v)) => Some(v.to_string()),
                None => {
                    i += 1;
                    args.get(i).cloned()
                }
            }
        } else {
            arg.strip_prefix("-H")
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        if let Some(what) = literal_credential(arg) {
            return Err(literal_in_flag(args, i, flag, &what));
        }
        if let Some(header) = header {
            check_header(&header, secrets)?;
        }
        i += 1;
    }
    Ok(())
}

/// A literal credential in argument `i`: named by the flag it belongs to,
/// never by the value itself.
fn literal_in_flag(args: &[String], i: usize, flag: &str, what: &str) -> KubeError {
    let named = if args[i].starts_with('-') {
        flag
    } else {
        i.checked_sub(1)
            .and_then(|p| args.get(p))
            .filter(|p| p.starts_with('-'))
            .map_or("a profile argument", |p| p.as_str())
    };
    KubeError::LiteralSecret {
        what: format!("{what} ({named})"),
        hint: "declare it as a Secret env (ENV=SECRET:KEY) and write $(ENV) where it goes, \
               which the kubelet expands"
            .into(),
    }
}

/// A `-H` header named like a credential, or with a value shaped like one
/// whatever the name (`X-Custom: Bearer ...`), must be built from a Secret
/// env (`$(ENV)`).
fn check_header(header: &str, secrets: &[SecretEnv]) -> Result<(), KubeError> {
    if header_credential(header).is_none() {
        return Ok(());
    }
    let refs_secret = secrets
        .iter()
        .any(|s| header.contains(&format!("$({})", s.env)));
    if refs_secret {
        return Ok(());
    }
    let name = header_name(header);
    Err(KubeError::LiteralSecret {
        what: format!("header {name}"),
        hint: format!(
            "declare the value as a Secret env (ENV=SECRET:KEY) and write the header as \
             \"{name}:... $(ENV)\", which the kubelet expands"
        ),
    })
}

/// The labels on the Job and on every Pod: speedbench's own and the caller's.
fn all_labels(job: &ShardedJob) -> Result<BTreeMap<String, String>, KubeError> {
    let mut labels = BTreeMap::from([
        (NAME_LABEL.to_string(), "speedbench".to_string()),
        (INSTANCE_LABEL.to_string(), job.name.clone()),
        (RUN_ID_LABEL.to_string(), job.run_id.clone()),
    ]);
    for (k, v) in &job.labels {
        if validate::reserved_label(k) {
            return Err(invalid(
                "label",
                k,
                "is reserved: the API server and the controllers set job-name, \
                 controller-uid, pod-template-hash and the kubernetes.io/ and k8s.io/ labels \
                 of Pods themselves",
            ));
        }
        if let Some(what) = literal_credential(v) {
            return Err(KubeError::LiteralSecret {
                what: format!("label {k} ({what})"),
                hint: "labels are readable by anyone who may list Pods: keep credentials \
                       out of them"
                    .into(),
            });
        }
        if labels.contains_key(k) {
            return Err(invalid(
                "label",
                k,
                "is set by speedbench itself (app.kubernetes.io/name, \
                 app.kubernetes.io/instance, speedbench.dev/run-id)",
            ));
        }
        labels.insert(k.clone(), v.clone());
    }
    Ok(labels)
}

/// The shape of an object-store prefix a shard can upload under: a scheme
/// and a bucket, no whitespace, no `$(` (the kubelet would expand it). The
/// binary parses the URL fully (speedbench-store) before it builds a Job.
fn check_store_url(url: &str) -> Result<(), KubeError> {
    let shape = url.split_once("://").filter(|(scheme, rest)| {
        scheme.starts_with(|c: char| c.is_ascii_lowercase())
            && scheme
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            && !rest.trim_start_matches('/').is_empty()
    });
    if let Some(what) = literal_credential(url) {
        return Err(KubeError::LiteralSecret {
            what: format!("the results URL ({what})"),
            hint: "the store's credentials come from its standard environment variables: \
                   give them as Secret envs"
                .into(),
        });
    }
    if shape.is_none() || url.contains(char::is_whitespace) || url.contains("$(") {
        return Err(invalid(
            "results url",
            url,
            "must be an object-store prefix such as s3://bucket/prefix",
        ));
    }
    Ok(())
}

/// The container's arguments: `profile`, the caller's flags, then the
/// shard, run id, start and output flags.
fn container_args(job: &ShardedJob) -> Vec<String> {
    let mut args = vec!["profile".to_string()];
    args.extend(job.profile_args.iter().cloned());
    let base = job.output.base();
    args.extend([
        "--shard-count".to_string(),
        job.shards.to_string(),
        "--shard-index".to_string(),
        format!("$({SHARD_INDEX_ENV})"),
        "--run-id".to_string(),
        job.run_id.clone(),
        "--start-at".to_string(),
        job.start_at_unix.to_string(),
        "--output-artifact-dir".to_string(),
        format!(
            "{base}/{}/shard$({SHARD_INDEX_ENV})of{}",
            job.run_id, job.shards
        ),
    ]);
    args
}

/// Builds the Indexed Job of a sharded run and checks it with
/// [`check_job`].
///
/// Retries: `backoffLimitPerIndex: 0`. A shard Pod that fails is not run
/// again: a retry would start after the shared `--start-at` (so at once,
/// alone, offering its share of the load out of step with the others) and
/// would find its directory holding the failed attempt. The other shards go
/// on; the Job ends `Failed`, and `speedbench report` names the failed
/// shard. `restartPolicy: Never` (required with a per-index limit).
pub fn build_job(input: &ShardedJob) -> Result<Job, KubeError> {
    check_input(input)?;
    let labels = all_labels(input)?;
    let shards = i32::try_from(input.shards).expect("at most MAX_SHARDS");
    let job = Job {
        metadata: ObjectMeta {
            name: Some(input.name.clone()),
            namespace: Some(input.namespace.clone()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".to_string()),
            completions: Some(shards),
            parallelism: Some(shards),
            backoff_limit_per_index: Some(0),
            active_deadline_seconds: input.active_deadline_seconds.map(i64::from),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(pod_spec(input)),
            },
            ..Default::default()
        }),
        status: None,
    };
    check_job(&job)?;
    Ok(job)
}

/// Every field of the input a Job could not be built from, and every
/// credential given as a literal, refused before anything is built.
fn check_input(input: &ShardedJob) -> Result<(), KubeError> {
    if input.shards == 0 || input.shards > MAX_SHARDS {
        return Err(invalid(
            "shards",
            input.shards,
            format!("must be 1 to {MAX_SHARDS} (one Pod per shard)"),
        ));
    }
    if !(input.start_at_unix.is_finite() && input.start_at_unix > 0.0) {
        return Err(invalid(
            "start at",
            input.start_at_unix,
            "must be a Unix time in seconds",
        ));
    }
    if input.command.is_empty() || input.command.iter().any(String::is_empty) {
        return Err(KubeError::Missing {
            field: "command".into(),
            reason: "the command that starts speedbench in the image (e.g. speedbench)".into(),
        });
    }
    validate::label_value("run id", &input.run_id)?;
    if input.run_id.is_empty() {
        return Err(KubeError::Missing {
            field: "run id".into(),
            reason: "every shard records under it and the report merges by it".into(),
        });
    }
    match &input.output {
        ResultsOutput::Pvc(pvc) => {
            if !pvc.mount_path.starts_with('/') {
                return Err(invalid(
                    "mount path",
                    &pvc.mount_path,
                    "must be an absolute path",
                ));
            }
        }
        ResultsOutput::Store { url } => check_store_url(url)?,
    }
    for s in &input.secrets {
        s.check()?;
    }
    for (name, value) in &input.env {
        validate::env_name("env name", name)?;
        // By its name (AWS_CREDS, HF_TKN, DB_PWD) or by what the value
        // holds (a key shape, a header with a credential, a URL password).
        let held = literal_credential(value);
        if is_credential_name(name) || held.is_some() {
            let what = held.map_or_else(|| format!("env {name}"), |w| format!("env {name} ({w})"));
            return Err(KubeError::LiteralSecret {
                what,
                hint: format!("a Secret env {name}=SECRET:KEY"),
            });
        }
    }
    check_profile_args(&input.profile_args, &input.secrets)
}

/// The Pod of every shard: one container, the results volume, the
/// spread over nodes.
fn pod_spec(input: &ShardedJob) -> PodSpec {
    PodSpec {
        restart_policy: Some("Never".to_string()),
        containers: vec![container(input)],
        volumes: match &input.output {
            ResultsOutput::Pvc(pvc) => Some(vec![Volume {
                name: RESULTS_VOLUME.to_string(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: pvc.claim.clone(),
                    read_only: None,
                }),
                ..Default::default()
            }]),
            ResultsOutput::Store { .. } => None,
        },
        service_account_name: input.service_account.clone(),
        topology_spread_constraints: spread(input),
        ..Default::default()
    }
}

/// The speedbench container: image, command, arguments, environment,
/// resources and the results mount.
fn container(input: &ShardedJob) -> Container {
    let quantities = |m: &BTreeMap<String, String>| {
        (!m.is_empty()).then(|| {
            m.iter()
                .map(|(k, v)| (k.clone(), Quantity(v.clone())))
                .collect::<BTreeMap<_, _>>()
        })
    };
    let resources = (!input.resources.requests.is_empty() || !input.resources.limits.is_empty())
        .then(|| ResourceRequirements {
            requests: quantities(&input.resources.requests),
            limits: quantities(&input.resources.limits),
            ..Default::default()
        });
    Container {
        name: CONTAINER_NAME.to_string(),
        image: Some(input.image.clone()),
        image_pull_policy: input.image_pull_policy.map(|p| p.as_str().to_string()),
        command: Some(input.command.clone()),
        args: Some(container_args(input)),
        env: Some(container_env(input)),
        resources,
        volume_mounts: match &input.output {
            ResultsOutput::Pvc(pvc) => Some(vec![VolumeMount {
                name: RESULTS_VOLUME.to_string(),
                mount_path: pvc.mount_path.clone(),
                ..Default::default()
            }]),
            ResultsOutput::Store { .. } => None,
        },
        ..Default::default()
    }
}

/// The shard index from the Pod's completion-index annotation, the plain
/// variables, and every Secret reference.
fn container_env(input: &ShardedJob) -> Vec<EnvVar> {
    let mut env = vec![EnvVar {
        name: SHARD_INDEX_ENV.to_string(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: format!("metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }];
    env.extend(input.env.iter().map(|(name, value)| EnvVar {
        name: name.clone(),
        value: Some(value.clone()),
        ..Default::default()
    }));
    env.extend(input.secrets.iter().map(|s| EnvVar {
        name: s.env.clone(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: s.secret.clone(),
                key: s.key.clone(),
                optional: Some(false),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }));
    env
}

/// The Pods spread over nodes by hostname, as asked.
fn spread(input: &ShardedJob) -> Option<Vec<TopologySpreadConstraint>> {
    let when = match input.spread {
        Spread::None => return None,
        Spread::Preferred => "ScheduleAnyway",
        Spread::Required => "DoNotSchedule",
    };
    Some(vec![TopologySpreadConstraint {
        max_skew: 1,
        topology_key: "kubernetes.io/hostname".to_string(),
        when_unsatisfiable: when.to_string(),
        label_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([
                (INSTANCE_LABEL.to_string(), input.name.clone()),
                (RUN_ID_LABEL.to_string(), input.run_id.clone()),
            ])),
            ..Default::default()
        }),
        ..Default::default()
    }])
}

/// The container's arguments as the kubelet hands them to the process of
/// shard `index`: `$(NAME)` replaced by the value of the container's
/// environment variable `NAME` (its shard index for
/// [`SHARD_INDEX_ENV`], `secret_placeholder` for a Secret env; a Secret's
/// value is not known here), `$$` by `$`, and a reference to an undefined
/// variable left as written, as the kubelet does.
pub fn expanded_args(job: &Job, index: u32, secret_placeholder: &str) -> Vec<String> {
    let Some(container) = first_container(job) else {
        return Vec::new();
    };
    let env: BTreeMap<&str, String> = container
        .env
        .iter()
        .flatten()
        .map(|e| {
            let value = if e.name == SHARD_INDEX_ENV {
                index.to_string()
            } else if let Some(v) = &e.value {
                v.clone()
            } else {
                secret_placeholder.to_string()
            };
            (e.name.as_str(), value)
        })
        .collect();
    container
        .args
        .iter()
        .flatten()
        .map(|a| expand(a, &env))
        .collect()
}

/// The kubelet's `$(VAR)` expansion of one argument.
fn expand(arg: &str, env: &BTreeMap<&str, String>) -> String {
    let mut out = String::new();
    let mut rest = arg;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(end) => {
                    let name = &inner[..end];
                    match env.get(name) {
                        Some(v) => out.push_str(v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &inner[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = inner;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

fn first_container(job: &Job) -> Option<&Container> {
    job.spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .first()
}

fn check_labels(field: &str, labels: Option<&BTreeMap<String, String>>) -> Result<(), KubeError> {
    for (k, v) in labels.into_iter().flatten() {
        validate::qualified_name(&format!("{field} key"), k)?;
        validate::label_value(&format!("{field} {k}"), v)?;
    }
    Ok(())
}

fn missing(field: &str, reason: &str) -> KubeError {
    KubeError::Missing {
        field: field.to_string(),
        reason: reason.to_string(),
    }
}

/// Whether a resource name is one the API server accepts in a container's
/// requests or limits, and whether it is an extended resource (requests
/// must then equal limits).
fn resource_kind(name: &str) -> Result<bool, KubeError> {
    const STANDARD: &[&str] = &["cpu", "memory", "ephemeral-storage"];
    if STANDARD.contains(&name) || name.starts_with("hugepages-") {
        return Ok(false);
    }
    validate::qualified_name("resource name", name)?;
    match name.split_once('/') {
        Some((prefix, _)) if prefix != "kubernetes.io" && !prefix.ends_with(".kubernetes.io") => {
            Ok(true)
        }
        _ => Err(invalid(
            "resource name",
            name,
            "is neither cpu, memory, ephemeral-storage, hugepages-<size> nor an extended \
             resource with a domain prefix (e.g. nvidia.com/gpu)",
        )),
    }
}

fn check_resources(r: &ResourceRequirements) -> Result<(), KubeError> {
    let mut requests = BTreeMap::new();
    let mut limits = BTreeMap::new();
    for (map, which, out) in [
        (&r.requests, "requests", &mut requests),
        (&r.limits, "limits", &mut limits),
    ] {
        for (name, q) in map.iter().flatten() {
            let extended = resource_kind(name)?;
            let v = validate::quantity(&format!("resources.{which}.{name}"), &q.0)?;
            if name == "cpu" && v > validate::MAX_QUANTITY / 1000.0 {
                return Err(invalid(
                    &format!("resources.{which}.{name}"),
                    &q.0,
                    "is too large: CPU is counted in millicores, which must stay below 2^63-1",
                ));
            }
            if extended && v.fract() != 0.0 {
                return Err(invalid(
                    &format!("resources.{which}.{name}"),
                    &q.0,
                    "an extended resource must be a whole number",
                ));
            }
            out.insert(name.clone(), (v, q.0.clone(), extended));
        }
    }
    for (name, (req, req_text, extended)) in &requests {
        match limits.get(name) {
            Some((lim, lim_text, _)) if req > lim => {
                return Err(invalid(
                    &format!("resources.requests.{name}"),
                    req_text,
                    format!("is more than its limit {lim_text}"),
                ));
            }
            Some((lim, lim_text, _)) if *extended && req != lim => {
                return Err(invalid(
                    &format!("resources.requests.{name}"),
                    req_text,
                    format!("must equal its limit {lim_text} (an extended resource)"),
                ));
            }
            None if *extended => {
                return Err(invalid(
                    &format!("resources.requests.{name}"),
                    req_text,
                    "needs a limit too (an extended resource cannot be overcommitted)",
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

fn check_container(c: &Container) -> Result<(), KubeError> {
    validate::dns_label("container name", &c.name)?;
    let image = c.image.as_deref().unwrap_or("");
    if image.is_empty() {
        return Err(missing(
            "image",
            "the container image holding the speedbench binary",
        ));
    }
    if image.trim() != image || image.contains(char::is_whitespace) {
        return Err(invalid("image", image, "must not contain whitespace"));
    }
    if let Some(p) = &c.image_pull_policy
        && !["Always", "IfNotPresent", "Never"].contains(&p.as_str())
    {
        return Err(invalid(
            "imagePullPolicy",
            p,
            "must be Always, IfNotPresent or Never",
        ));
    }
    check_env(c)?;
    if let Some(r) = &c.resources {
        check_resources(r)?;
    }
    let mut paths = BTreeSet::new();
    for m in c.volume_mounts.iter().flatten() {
        if !m.mount_path.starts_with('/') {
            return Err(invalid(
                "volumeMounts.mountPath",
                &m.mount_path,
                "must be an absolute path",
            ));
        }
        if m.mount_path.split('/').any(|p| p == "..") {
            return Err(invalid(
                "volumeMounts.mountPath",
                &m.mount_path,
                "must not contain '..'",
            ));
        }
        if !paths.insert(m.mount_path.as_str()) {
            return Err(KubeError::Duplicate {
                field: "volumeMounts.mountPath".into(),
                name: m.mount_path.clone(),
            });
        }
    }
    Ok(())
}

/// A container's environment: names valid and unique, one source each,
/// Secret references well formed, no credential as a literal value.
fn check_env(c: &Container) -> Result<(), KubeError> {
    let mut names = BTreeSet::new();
    for e in c.env.iter().flatten() {
        validate::env_name("env name", &e.name)?;
        if !names.insert(e.name.as_str()) {
            return Err(KubeError::Duplicate {
                field: "env".into(),
                name: e.name.clone(),
            });
        }
        match (&e.value, &e.value_from) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    &format!("env {}", e.name),
                    "value and valueFrom",
                    "may have a value or a valueFrom, not both",
                ));
            }
            (Some(v), None)
                if !v.is_empty()
                    && (is_credential_name(&e.name) || literal_credential(v).is_some()) =>
            {
                return Err(KubeError::LiteralSecret {
                    what: format!("env {}", e.name),
                    hint: "valueFrom.secretKeyRef".into(),
                });
            }
            (_, Some(from)) => {
                let sources = [
                    from.secret_key_ref.is_some(),
                    from.field_ref.is_some(),
                    from.config_map_key_ref.is_some(),
                    from.resource_field_ref.is_some(),
                ];
                if sources.iter().filter(|s| **s).count() != 1 {
                    return Err(invalid(
                        &format!("env {}", e.name),
                        "valueFrom",
                        "must have exactly one source",
                    ));
                }
                if let Some(s) = &from.secret_key_ref {
                    validate::dns_subdomain(&format!("secretKeyRef.name of {}", e.name), &s.name)?;
                    validate::secret_key(&format!("secretKeyRef.key of {}", e.name), &s.key)?;
                }
                if let Some(f) = &from.field_ref
                    && f.field_path.is_empty()
                {
                    return Err(missing(
                        &format!("env {} fieldRef.fieldPath", e.name),
                        "a field",
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks every field of a Job that an API server would reject, for the
/// fields a speedbench Job sets, and the Indexed-Job rules: name and
/// namespace, labels (Job, Pod template, spread selectors), `Indexed`
/// completion with `completions == parallelism` of 1 to [`MAX_SHARDS`], the
/// Pods' hostnames (`NAME-INDEX`) within 63 characters, a per-index backoff
/// only with `restartPolicy: Never`, containers (name, image, pull policy,
/// environment names unique and valid, `valueFrom` with one source, Secret
/// references, no literal credential), resource quantities (parse, are not
/// negative, requests within limits, extended resources whole and equal),
/// volumes and their mounts, the service account's name, and the spread
/// constraints.
pub fn check_job(job: &Job) -> Result<(), KubeError> {
    let name = job.metadata.name.as_deref().unwrap_or("");
    validate::dns_label("metadata.name", name)?;
    validate::dns_label(
        "metadata.namespace",
        job.metadata.namespace.as_deref().unwrap_or(""),
    )?;
    check_labels("metadata.labels", job.metadata.labels.as_ref())?;
    let spec = job
        .spec
        .as_ref()
        .ok_or_else(|| missing("spec", "a Job spec"))?;
    check_indexed(name, spec)?;
    let pod = &spec.template;
    check_labels(
        "spec.template.metadata.labels",
        pod.metadata.as_ref().and_then(|m| m.labels.as_ref()),
    )?;
    let pod_spec = pod
        .spec
        .as_ref()
        .ok_or_else(|| missing("spec.template.spec", "a Pod spec"))?;
    check_limits(spec, pod_spec)?;
    if let Some(sa) = &pod_spec.service_account_name {
        validate::dns_subdomain("spec.template.spec.serviceAccountName", sa)?;
    }
    check_containers_and_volumes(pod_spec)?;
    for t in pod_spec.topology_spread_constraints.iter().flatten() {
        check_spread(t)?;
    }
    Ok(())
}

/// An Indexed Job whose every shard runs at once, and whose Pods'
/// hostnames (NAME-INDEX) fit a DNS label.
fn check_indexed(name: &str, spec: &JobSpec) -> Result<(), KubeError> {
    if spec.completion_mode.as_deref() != Some("Indexed") {
        return Err(invalid(
            "spec.completionMode",
            spec.completion_mode.as_deref().unwrap_or("(none)"),
            "must be Indexed: each Pod's completion index is its shard",
        ));
    }
    let completions = spec
        .completions
        .ok_or_else(|| missing("spec.completions", "an Indexed Job needs completions"))?;
    let max = i32::try_from(MAX_SHARDS).unwrap_or(i32::MAX);
    if !(1..=max).contains(&completions) {
        return Err(invalid(
            "spec.completions",
            completions,
            format!("must be 1 to {MAX_SHARDS}"),
        ));
    }
    if spec.parallelism != Some(completions) {
        return Err(invalid(
            "spec.parallelism",
            spec.parallelism.map_or("(none)".into(), |p| p.to_string()),
            format!(
                "must equal completions ({completions}): every shard runs at once, \
                 each offering its share of the load"
            ),
        ));
    }
    let longest_host = name.len() + 1 + (completions - 1).to_string().len();
    if longest_host > validate::DNS_LABEL_MAX {
        return Err(invalid(
            "metadata.name",
            name,
            format!(
                "is too long for {completions} Pods: their hostnames NAME-INDEX reach \
                 {longest_host} characters, more than {}",
                validate::DNS_LABEL_MAX
            ),
        ));
    }
    if spec.selector.is_some() || spec.manual_selector == Some(true) {
        return Err(invalid(
            "spec.selector",
            "set",
            "leave it to the Job controller",
        ));
    }
    Ok(())
}

/// The restart policy, backoff limits and deadline the API server takes.
fn check_limits(spec: &JobSpec, pod_spec: &PodSpec) -> Result<(), KubeError> {
    let restart = pod_spec.restart_policy.as_deref().unwrap_or("Always");
    if restart != "Never" && restart != "OnFailure" {
        return Err(invalid(
            "spec.template.spec.restartPolicy",
            restart,
            "a Job's Pods must have Never or OnFailure",
        ));
    }
    if let Some(b) = spec.backoff_limit_per_index {
        if b < 0 {
            return Err(invalid(
                "spec.backoffLimitPerIndex",
                b,
                "must not be negative",
            ));
        }
        if restart != "Never" {
            return Err(invalid(
                "spec.template.spec.restartPolicy",
                restart,
                "must be Never with backoffLimitPerIndex",
            ));
        }
    }
    if spec.backoff_limit.is_some_and(|b| b < 0) {
        return Err(invalid(
            "spec.backoffLimit",
            spec.backoff_limit.unwrap_or(0),
            "must not be negative",
        ));
    }
    if spec.active_deadline_seconds.is_some_and(|d| d <= 0) {
        return Err(invalid(
            "spec.activeDeadlineSeconds",
            spec.active_deadline_seconds.unwrap_or(0),
            "must be positive",
        ));
    }
    Ok(())
}

/// Containers and volumes each named once, every mount naming a volume.
fn check_containers_and_volumes(pod_spec: &PodSpec) -> Result<(), KubeError> {
    if pod_spec.containers.is_empty() {
        return Err(missing("spec.template.spec.containers", "one container"));
    }
    let mut container_names = BTreeSet::new();
    for c in &pod_spec.containers {
        check_container(c)?;
        if !container_names.insert(c.name.as_str()) {
            return Err(KubeError::Duplicate {
                field: "containers".into(),
                name: c.name.clone(),
            });
        }
    }
    let mut volumes = BTreeSet::new();
    for v in pod_spec.volumes.iter().flatten() {
        validate::dns_label("volume name", &v.name)?;
        if !volumes.insert(v.name.as_str()) {
            return Err(KubeError::Duplicate {
                field: "volumes".into(),
                name: v.name.clone(),
            });
        }
        if let Some(pvc) = &v.persistent_volume_claim {
            validate::dns_subdomain("persistentVolumeClaim.claimName", &pvc.claim_name)?;
        }
    }
    for c in &pod_spec.containers {
        for m in c.volume_mounts.iter().flatten() {
            if !volumes.contains(m.name.as_str()) {
                return Err(invalid(
                    "volumeMounts.name",
                    &m.name,
                    "names no volume of the Pod",
                ));
            }
        }
    }
    Ok(())
}

/// One topology spread constraint as the API server checks it.
fn check_spread(t: &TopologySpreadConstraint) -> Result<(), KubeError> {
    if t.max_skew < 1 {
        return Err(invalid(
            "topologySpreadConstraints.maxSkew",
            t.max_skew,
            "must be at least 1",
        ));
    }
    validate::qualified_name("topologySpreadConstraints.topologyKey", &t.topology_key)?;
    if !["DoNotSchedule", "ScheduleAnyway"].contains(&t.when_unsatisfiable.as_str()) {
        return Err(invalid(
            "topologySpreadConstraints.whenUnsatisfiable",
            &t.when_unsatisfiable,
            "must be DoNotSchedule or ScheduleAnyway",
        ));
    }
    check_labels(
        "topologySpreadConstraints.labelSelector",
        t.label_selector
            .as_ref()
            .and_then(|s| s.match_labels.as_ref()),
    )
}

#[cfg(test)]
mod tests;
