//! Invariants no compiler checks: every case is stamped, every file opens
//! with a module doc and stays small.

use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn crate_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("tests"), &mut files);
    files.sort();
    files
}

#[test]
fn every_case_is_stamped_and_every_stamped_case_exists() {
    let cases_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cases");
    let mut files = Vec::new();
    rust_files(&cases_dir, &mut files);
    let mut defined = Vec::new();
    for path in files {
        let relative = path.strip_prefix(&cases_dir).unwrap().with_extension("");
        let module: Vec<&str> = relative.iter().map(|p| p.to_str().unwrap()).collect();
        for line in fs::read_to_string(&path).unwrap().lines() {
            if let Some(rest) = line.strip_prefix("pub async fn ") {
                let name = rest.split(['<', '(']).next().unwrap();
                defined.push(format!("{}::{name}", module.join("::")));
            }
        }
    }
    defined.sort();
    let mut stamped: Vec<String> = flowstate_testkit::CASES
        .iter()
        .flat_map(|(_, cases)| cases.iter())
        .map(|c| (*c).to_owned())
        .collect();
    stamped.sort();
    assert_eq!(
        defined, stamped,
        "the case lists under suite/ and the cases differ"
    );
    assert!(stamped.len() >= 321, "only {} cases", stamped.len());
}

#[test]
fn every_family_has_a_folder_and_a_trait() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let family_rs = fs::read_to_string(root.join("family.rs")).unwrap();
    for (family, cases) in flowstate_testkit::CASES {
        let folder = cases[0].split("::").next().unwrap();
        assert!(
            root.join("cases").join(folder).is_dir(),
            "{family}: no folder cases/{folder}"
        );
        assert!(
            family_rs.contains(&format!("/// `{family}`: ")),
            "{family}: no trait in family.rs"
        );
    }
}

#[test]
fn every_file_opens_with_a_module_doc_and_stays_small() {
    for path in crate_files() {
        let text = fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("//!"),
            "{} has no //! module doc",
            path.display()
        );
        let lines = text.lines().count();
        assert!(lines <= 400, "{} has {lines} lines", path.display());
    }
}

/// The hookup example between `// hookup: begin` and `// hookup: end` in
/// `text`, doc-comment markers stripped.
fn hookup(text: &str) -> Vec<String> {
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            line.strip_prefix("//! ")
                .or(line.strip_prefix("//!"))
                .unwrap_or(line)
        })
        .map(str::to_owned)
        .collect();
    let begin = lines.iter().position(|l| l == "// hookup: begin");
    let end = lines.iter().position(|l| l == "// hookup: end");
    let (Some(begin), Some(end)) = (begin, end) else {
        panic!("no `// hookup: begin` ... `// hookup: end` block");
    };
    lines[begin + 1..end].to_vec()
}

#[test]
fn the_readme_hookup_is_the_compiled_one_and_at_most_ten_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let crate_doc = hookup(&fs::read_to_string(root.join("src/lib.rs")).unwrap());
    let readme = hookup(&fs::read_to_string(root.join("../README.md")).unwrap());
    assert_eq!(
        readme, crate_doc,
        "the README's hookup example differs from the crate doc's, which is compiled"
    );
    let code = crate_doc.iter().filter(|l| !l.trim().is_empty()).count();
    assert!(code <= 10, "the hookup takes {code} lines");
}
