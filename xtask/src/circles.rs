//! `cargo xtask circles`: import circles between the top-level modules of
//! each crate under `crates/` and each binary under `bins/` (issue #23 broke
//! all of them; CI keeps it so).
//!
//! A module is a top-level file `src/NAME.rs` or directory `src/NAME/`; it
//! names another when any of its files' code (comments and everything
//! from the first `#[cfg(test)]` on left out) says `crate::OTHER`, in any
//! form: a path, a `use crate::OTHER::..`, or a group `use crate::{OTHER,
//! ..}` (each name of the group counts). A circle is a strongly connected
//! component of more than one module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module name -> the modules it names.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// Runs the check; `Err` lists every circle.
pub(crate) fn run(root: &Path) -> Result<(), String> {
    let mut found = Vec::new();
    let mut names = Vec::new();
    for parent in ["crates", "bins"] {
        let dirs = std::fs::read_dir(root.join(parent)).map_err(|e| format!("{parent}/: {e}"))?;
        names.extend(dirs.filter_map(|e| e.ok()).map(|e| e.path()));
    }
    names.sort();
    for krate in names {
        let src = krate.join("src");
        if !src.is_dir() {
            continue;
        }
        for circle in circles(&graph(&src)?) {
            let name = krate.file_name().unwrap_or_default().to_string_lossy();
            found.push(format!("{name}: {}", circle.join(" -> ")));
        }
    }
    if found.is_empty() {
        println!("circles: none between the modules of any crate");
        return Ok(());
    }
    Err(format!(
        "import circles between modules:\n  {}",
        found.join("\n  ")
    ))
}

/// The code of a file, without comments and tests.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The modules `text` names through `crate::`.
fn named(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        if at > 0 && text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &text[at + "crate::".len()..];
        match rest.strip_prefix('{') {
            Some(group) => out.extend(group_names(group)),
            None => out.extend(first_name(rest)),
        }
    }
    out
}

/// The identifier `text` starts with, if any.
fn first_name(text: &str) -> Option<String> {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    (end > 0).then(|| text[..end].to_string())
}

/// The first name of each item of a `{a, b::c, d::{e, f}}` group, `text`
/// starting just after its opening brace.
fn group_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut item_start = true;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => item_start = true,
            c if c.is_whitespace() => {}
            _ if item_start && depth == 0 => {
                item_start = false;
                out.extend(first_name(&text[i..]));
            }
            _ => {}
        }
    }
    out
}

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> Result<(), String> {
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The module graph of one crate's `src/`.
fn graph(src: &Path) -> Result<Graph, String> {
    let mut files: BTreeMap<String, Vec<std::path::PathBuf>> = BTreeMap::new();
    for entry in std::fs::read_dir(src).map_err(|e| format!("{}: {e}", src.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        let stem = path.file_stem().unwrap_or_default().to_string_lossy();
        if path.is_dir() {
            rust_files(&path, files.entry(stem.into_owned()).or_default())?;
        } else if path.extension().is_some_and(|e| e == "rs") && stem != "lib" && stem != "main" {
            files.entry(stem.into_owned()).or_default().push(path);
        }
    }
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    let mut graph = Graph::new();
    for (module, paths) in &files {
        let mut deps = BTreeSet::new();
        for path in paths {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            deps.extend(named(&code(&text)));
        }
        deps.retain(|d| d != module && modules.contains(d));
        graph.insert(module.clone(), deps);
    }
    Ok(graph)
}

/// The strongly connected components of more than one node (Tarjan).
fn circles(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        out: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            for w in &self.graph[v] {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let at = self.stack.iter().rposition(|&x| x == v).unwrap_or(0);
                let component: Vec<String> = self.stack.drain(at..).map(str::to_string).collect();
                if component.len() > 1 {
                    self.out.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(edges: &[(&str, &[&str])]) -> Graph {
        edges
            .iter()
            .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    #[test]
    fn a_circle_is_found_and_a_chain_is_not() {
        let chain = g(&[("a", &["b"]), ("b", &["c"]), ("c", &[])]);
        assert!(circles(&chain).is_empty());
        let circle = g(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &["a"])]);
        let found = circles(&circle);
        assert_eq!(found.len(), 1);
        let mut names = found[0].clone();
        names.sort();
        assert_eq!(names, ["a", "b", "c"]);
    }

    #[test]
    fn every_import_form_counts() {
        let text = "use crate::{alpha, beta::X, gamma::{Y, Z}};\n\
                    use crate::{\n    delta,\n    self_like::W,\n};\nfn f() { crate::eps::g(); }";
        assert_eq!(
            named(&code(text)).into_iter().collect::<Vec<_>>(),
            ["alpha", "beta", "delta", "eps", "gamma", "self_like"]
        );
    }

    #[test]
    fn only_code_counts() {
        let text = "use crate::a::X;\n// crate::b in a comment\nfn f() { my_crate::c(); }\n\
                    #[cfg(test)]\nmod tests { use crate::d; }";
        assert_eq!(named(&code(text)).into_iter().collect::<Vec<_>>(), ["a"]);
    }
}
