//! `cargo xtask bench dataset [--mb N]`: how fast a throughput_32k-sized
//! resolved SPEED-Bench file (1,536 rows, about 200 MB of JSONL) loads.
//!
//! Generates the file in a temporary directory (deterministic text, ~130 KB
//! per row, escapes and non-ASCII included as in real prompts), then times:
//! the plain load (`Dataset::from_jsonl_file`), the load through a dataset
//! cache whose bundle manifest is verified (sha256), and a category filter.

use std::time::Instant;

use speedbench_dataset::{Dataset, LoadOptions, load_public_dataset};

fn row_text(i: usize, bytes: usize) -> String {
    const WORDS: [&str; 12] = [
        "token",
        "draft",
        "verify",
        "accept",
        "the",
        "model",
        "naïve",
        "café",
        "\"quoted\"",
        "line\nbreak",
        "tab\there",
        "→",
    ];
    let mut s = format!("[row {i}] ");
    let mut k = i;
    while s.len() < bytes {
        k = k
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s.push_str(WORDS[(k >> 33) % WORDS.len()]);
        s.push(' ');
    }
    s
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let mb: usize = match args.iter().position(|a| a == "--mb") {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or("--mb needs a number")?,
        None => 200,
    };
    let rows = 1536;
    let per_row = mb * 1_000_000 / rows;
    let dir = std::env::temp_dir().join(format!("speedbench-bench-dataset-{}", std::process::id()));
    let cache = dir.join("cache");
    let file = cache.join("speed-bench/throughput_32k.jsonl");
    std::fs::create_dir_all(file.parent().unwrap()).map_err(|e| e.to_string())?;
    let tiers = ["low_entropy", "mixed", "high_entropy"];
    let mut jsonl = String::with_capacity(mb * 1_050_000);
    for i in 0..rows {
        let row = serde_json::json!({
            "question_id": format!("{i:032x}"),
            "category": tiers[i % 3],
            "sub_category": null,
            "source": "bench",
            "src_id": i.to_string(),
            "difficulty": null,
            "multiturn": false,
            "messages": [{"role": "user", "content": row_text(i, per_row)}],
        });
        jsonl.push_str(&row.to_string());
        jsonl.push('\n');
    }
    std::fs::write(&file, &jsonl).map_err(|e| e.to_string())?;
    let size_mb = jsonl.len() as f64 / 1e6;
    drop(jsonl);

    let result = (|| -> Result<(), String> {
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            let d = Dataset::from_jsonl_file(&file).map_err(|e| e.to_string())?;
            best = best.min(t.elapsed().as_secs_f64());
            assert_eq!(d.conversations.len(), rows);
        }
        println!(
            "load   {size_mb:.1} MB, {rows} rows: {:.0} ms ({:.0} MB/s), best of 3",
            best * 1e3,
            size_mb / best
        );

        // The same file as a pre-staged bundle: sha256 verified on load.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let staged = dir.join("staged");
        let text = std::fs::read_to_string(&file).map_err(|e| e.to_string())?;
        let t = Instant::now();
        speedbench_dataset::bundle::stage_rows(
            &staged,
            "speed_bench_throughput_32k",
            &text,
            None,
            None,
            "bench",
        )
        .map_err(|e| e.to_string())?;
        println!(
            "stage  {size_mb:.1} MB into a bundle (validate + sha256 + write): {:.0} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
        drop(text);
        let mut options = LoadOptions::from_env(Some(staged));
        options.hub.offline = true;
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            let d = runtime
                .block_on(load_public_dataset(
                    "speed_bench_throughput_32k_mixed",
                    &options,
                ))
                .map_err(|e| e.to_string())?;
            best = best.min(t.elapsed().as_secs_f64());
            assert_eq!(d.dataset.conversations.len(), rows / 3);
        }
        println!(
            "public {size_mb:.1} MB via a verified bundle + category filter: {:.0} ms ({:.0} MB/s), best of 3",
            best * 1e3,
            size_mb / best
        );
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}
