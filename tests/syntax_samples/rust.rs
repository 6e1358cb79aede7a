//! Crate docs (with a bracket
use std::collections::HashMap;

/* a block /* nested ( */ still a comment */
fn first<'a>(x: &'a str, y: &'static str) -> &'a str {
    let c = '(';
    let q = '"';
    let e = '\'';
    let u = '\u{1F600}';
    let b = b'[';
    let s = "a \"quoted\" (word)";
    let raw = r"C:\dir\";
    let hashed = r#"{"key": "va(lue"}"#;
    let two = r##"a "# still ( "##;
    let bytes = br"raw [bytes";
    let multi = "first line (
second line ) with // no comment
third";
    let cont = "joined \
        here (";
    let fmt = format!("{}: {:?}", x, y); // a comment ( here
    let label: &'static str = "x";
    'outer: loop {
        break 'outer;
    }
    if x.len() > 2 { x } else { y }
}

/// Doc comment with "quotes
struct Point<'a> { name: &'a str }
fn more() {
    let a = "\\";
    let b = '\\';
    let c = b'\'';
    let d = br#"raw "bytes" ("#;
    let e = '\x41';
    /* "not a string ( */
    let f = r"raw over
lines (";
    let g = |x: &str| x.len();
    impl_trait::<'static>();
}
