//! llama.cpp `speed_bench.py`-style per-category table.

use speedbench_metrics::CategorySummary;

/// Renders `rows` as llama.cpp's `speed_bench.py` prints its summary.
///
/// Columns `category, samples, avg_prompt_t/s, avg_pred_t/s, avg_latency,
/// accept_rate`; speeds `%.2f`, latency `%.3fs` (seconds), rate `%.4f` (a
/// fraction), `n/a` for a missing value. Every cell, the last included, is
/// left-justified to its column's width; cells are joined by two spaces and
/// the header is underlined with dashes. Ends with a newline.
///
/// `samples` is [`CategorySummary::requests`]: successful requests (turns),
/// whereas llama.cpp counts whole conversations.
pub fn render_category_table(rows: &[CategorySummary]) -> String {
    const HEADER: [&str; 6] = [
        "category",
        "samples",
        "avg_prompt_t/s",
        "avg_pred_t/s",
        "avg_latency",
        "accept_rate",
    ];
    let or_na = |v: Option<String>| v.unwrap_or_else(|| "n/a".to_string());
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            [
                r.category.clone(),
                r.requests.to_string(),
                or_na(r.avg_prompt_tps.map(|v| format!("{v:.2}"))),
                or_na(r.avg_decode_tps.map(|v| format!("{v:.2}"))),
                or_na(r.avg_latency_s.map(|v| format!("{v:.3}s"))),
                or_na(r.accept_rate.map(|v| format!("{v:.4}"))),
            ]
        })
        .collect();
    let mut widths = HEADER.map(|h| h.chars().count());
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |row: Vec<String>| -> String {
        let padded: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        padded.join("  ") + "\n"
    };
    let mut out = line(HEADER.map(String::from).to_vec());
    out.push_str(&line(widths.iter().map(|&w| "-".repeat(w)).collect()));
    for row in cells {
        out.push_str(&line(row.to_vec()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        category: &str,
        requests: u64,
        prompt: Option<f64>,
        decode: Option<f64>,
        latency: Option<f64>,
        rate: Option<f64>,
    ) -> CategorySummary {
        CategorySummary {
            category: category.into(),
            requests,
            failed: 0,
            conversations: requests,
            avg_prompt_tps: prompt,
            avg_decode_tps: decode,
            avg_latency_s: latency,
            drafted: 0,
            accepted: 0,
            accept_rate: rate,
        }
    }

    #[test]
    fn llama_cpp_layout_exact() {
        // math: prompt/s mean (100+200)/2 = 150, pred/s (10+30)/2 = 20,
        //       latency (1+3)/2 = 2 s, rate 20/40 = 0.5.
        // coding: 400, 50, 2 s, nothing drafted -> n/a.
        // overall: (100+200+400)/3 = 233.333 -> 233.33, (10+30+50)/3 = 30,
        //          latency 2 s, rate 0.5.
        // A long name widens its column; every cell is padded, the last too.
        let rows = [
            row("math", 2, Some(150.0), Some(20.0), Some(2.0), Some(0.5)),
            row("coding", 1, Some(400.0), Some(50.0), Some(2.0), None),
            row("summarization", 0, None, None, None, None),
            row(
                "overall",
                3,
                Some(700.0 / 3.0),
                Some(30.0),
                Some(2.0),
                Some(0.5),
            ),
        ];
        let expected = "\
category       samples  avg_prompt_t/s  avg_pred_t/s  avg_latency  accept_rate
-------------  -------  --------------  ------------  -----------  -----------
math           2        150.00          20.00         2.000s       0.5000     
coding         1        400.00          50.00         2.000s       n/a        
summarization  0        n/a             n/a           n/a          n/a        
overall        3        233.33          30.00         2.000s       0.5000     
";
        assert_eq!(render_category_table(&rows), expected);
    }

    #[test]
    fn wide_values_widen_columns() {
        // 12345.678 -> "12345.68" (no thousands separator, as Python %.2f);
        // 0.12345 s -> "0.123s"; 2/3 -> "0.6667"; the samples column
        // widens to 9 digits.
        let rows = [row(
            "qa",
            123_456_789,
            Some(12_345.678),
            Some(1.0),
            Some(0.12345),
            Some(2.0 / 3.0),
        )];
        let out = render_category_table(&rows);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "category  samples    avg_prompt_t/s  avg_pred_t/s  avg_latency  accept_rate"
        );
        assert_eq!(
            lines[2],
            "qa        123456789  12345.68        1.00          0.123s       0.6667     "
        );
        assert_eq!(render_category_table(&[]).lines().count(), 2);
    }
}
