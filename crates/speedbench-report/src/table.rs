//! Plain UTF-8 box tables with a centered title, the look of AIPerf's (rich)
//! console tables without colors.

use comfy_table::{CellAlignment, ContentArrangement, Table};

/// Box characters in comfy-table's preset order: light verticals, a heavy
/// top border and header rule (like rich's `HEAVY_HEAD`, which comfy-table
/// cannot reproduce exactly since it has one vertical character for header
/// and body), a light bottom, no rules between body rows.
const PRESET: &str = "││━─┝━┿┥│    ┯┴┍┑└┘";

/// How the first column is aligned; every other column is right-aligned.
#[derive(Clone, Copy)]
pub(crate) enum FirstColumn {
    /// Right-aligned, as AIPerf's `Metric` column.
    Right,
    /// Left-aligned, as a report's `Model` column.
    Left,
}

/// Renders `title` centered over a box table; ends with a newline.
///
/// Columns never wrap: the output is meant for logs and terminals alike.
pub(crate) fn titled_table(
    title: &str,
    header: &[&str],
    rows: &[Vec<String>],
    first: FirstColumn,
) -> String {
    let mut table = Table::new();
    table
        .load_preset(PRESET)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.to_vec());
    for row in rows {
        table.add_row(row.clone());
    }
    for (i, column) in table.column_iter_mut().enumerate() {
        let align = match (i, first) {
            (0, FirstColumn::Left) => CellAlignment::Left,
            _ => CellAlignment::Right,
        };
        column.set_cell_alignment(align);
    }
    let body = table.to_string();
    let width = body.lines().next().map_or(0, |l| l.chars().count());
    let pad = width.saturating_sub(title.chars().count()) / 2;
    format!("{}{title}\n{body}\n", " ".repeat(pad))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_exact() {
        // Widths: "Metric" 6 / "A (ms)" 6, "avg" 3 / "1,234.50" 8. Table is
        // 1 + (1+6+1) + 1 + (1+8+1) + 1 = 21 wide; title "T" (1) gets
        // (21 - 1) / 2 = 10 spaces.
        let out = titled_table(
            "T",
            &["Metric", "avg"],
            &[vec!["A (ms)".into(), "1,234.50".into()]],
            FirstColumn::Right,
        );
        let expected = "          T\n\
                        ┍━━━━━━━━┯━━━━━━━━━━┑\n\
                        │ Metric │      avg │\n\
                        ┝━━━━━━━━┿━━━━━━━━━━┥\n\
                        │ A (ms) │ 1,234.50 │\n\
                        └────────┴──────────┘\n";
        assert_eq!(out, expected);
    }

    #[test]
    fn left_first_column() {
        let out = titled_table(
            "Report",
            &["Model", "x"],
            &[vec!["m".into(), "1.00".into()]],
            FirstColumn::Left,
        );
        assert!(out.contains("│ m     │ 1.00 │\n"), "{out}");
    }
}
