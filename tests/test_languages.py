"""Suggestions in languages other than Python (completer/syntax.py): the filters and the search ahead follow the
document's language, and a converted model, which writes most languages, answers in all of them unless
enabledLanguages says otherwise, while the embedded models stay with Python."""
from __future__ import annotations

import json
import time

import pytest

from completer.bundle import Bundle
from completer.filters import keep_suggestion, line_context, scan
from completer.indentation import indent_unit, next_line_indents
from completer.syntax import NEUTRAL, PYTHON, language_of_path, syntax_for
from lsp.rawclient import RawClient

JS, RUST, GO = syntax_for("javascript"), syntax_for("rust"), syntax_for("go")


def kept(line: str, above: list[str], syntax) -> bool:
    return keep_suggestion(line, line, "", line_context(above, syntax))


@pytest.mark.parametrize("line,above", [
    ("console.log('ready');  // don't wait", []),  # an apostrophe in a comment opens no string
    ("  .then((rows) => render(rows));", ["fetch(url)"]),  # a method chain starts a line
    ("if (rows.length === 0) return;", []),  # no block colon in a language of braces
    ("const total = items.reduce((sum, item) =>", []),  # goes on below
    ("function add(a, b) {", []),
    ("}", ["function add(a, b) {", "  return a + b;"]),
    ("  ${name}: (((", ["const text = `"]),  # inside a template string: anything
    ("  anything ( [ goes", ["/* a note"]),  # inside a block comment
    ("const path = `a/${dir}/b`;", []),
    ("  const x = 1;", []),  # indented first line: no IndentationError outside Python
    ("  }", ["function f() {", "  if (a) {", "    go();", "    }"]),  # a block's end after another's
])
def test_lines_python_would_refuse_are_kept_in_javascript(line, above):
    assert kept(line, above, JS)


@pytest.mark.parametrize("line,above,language", [
    ("return s.replace(/\"/g, '&quot;');", [], "javascript"),  # a regular expression's quote opens no string
    ("}", ["function f(s) {", "  s = s.replace(/['\"]+/g, '');"], "typescript"),  # nor its bracket anything
    ("if (/[(]/.test(s)) {", [], "javascript"),
    ("<p>Don't click here</p>", [], "javascriptreact"),  # a quote after a letter is an apostrophe
    ("return A' * B", [], "julia"),  # an adjoint
    ("let x' = g x", [], "haskell"),  # a prime
    ("int n = 1'000;", [], "cpp"),  # a digit separator
    ("for my $i (0..$#array) {", [], "perl"),  # `$#`, not a comment
    ("#[Route('/x', methods: ['GET'])]", [], "php"),  # an attribute, not a comment
    ("]]", ["--[[ a (", "note"], "lua"),  # the end of a block comment
    ("''';", ["s = '''"], "dart"),
    ('"""', ['x = """'], "elixir"),
    ('"""', ['"""'], "julia"),
    ("SELECT a /* (", [], "sql"),
    ("const v = (ready ?", [], "javascript"),  # goes on below
    ("}", ["function f(app) {", "  args.push(`\"\\`\"${app}\\`\"\"`);"], "javascript"),  # escaped backquotes
    ("}", ["function f(x) {", "  const g = `/*${x}`;"], "javascript"),  # no comment inside a template
    ("const h = a! / 2 + (b! / 3);", [], "typescript"),  # divisions after TypeScript's `!`
    ("if (flags.length > 1 && !/^[[<]/.test(flags[1])) {", [], "javascript"),  # a negated regular expression
    ("}", ["func f(s string) {", "\ts = strings.TrimRight(s, `\\`)"], "go"),  # a raw string has no escapes
    ("}", ["fun f() {", '    val p = """C:\\"""'], "kotlin"),
    ("  );", ["return (", '  <div><b>Note</b> (see <a href="x">docs</a>)</div>'], "javascriptreact"),
    ("}", ["fn f() {", "    let open = '(';"], "rust"),  # a character literal
    ("let q = '\"';", [], "rust"),
    ("let b = b'(';", [], "rust"),
    ("fn first<'a>(x: &'a str) -> &'a str {", [], "rust"),  # lifetimes
    ("y = (A*B)' * x[1:3]'", [], "julia"),  # adjoints after brackets
    ("f x'' y = Proxy 'True", [], "haskell"),
    ("  { x :: Int", [], "haskell"),  # leading commas leave the bracket open
    ("{- a {- nested -} note", [], "haskell"),
    ("table.sort(t, function(a, b)", [], "lua"),  # the call stays open over the function
    ("local s = [[ ( ]]", [], "lua"),  # a long string
    ("FROM (VALUES", [], "sql"),
    ("final re = RegExp(r'https?://\\S+');", [], "dart"),  # a raw string's // is no comment
    ("}", ["void f() {", "  final re = RegExp(r'https?://\\S+');"], "dart"),
    ("}", ["  run();"] * 500, "javascript"),  # closes what opened above the lines the filters read
])
def test_what_each_language_allows_is_kept(line, above, language):
    assert kept(line, above, syntax_for(language))


@pytest.mark.parametrize("language,opening,closing", [
    ("rust", "/*", "*/"), ("kotlin", "/*", "*/"), ("swift", "/*", "*/"), ("scala", "/*", "*/"), ("dart", "/*", "*/"),
    ("haskell", "{-", "-}"), ("elm", "{-", "-}"), ("julia", "#=", "=#"),
])
def test_a_block_comment_inside_another_leaves_the_outer_one_open(language, opening, closing):
    """In these languages block comments nest: code commented out with a comment in it stays a comment to the outer
    closing. Read as ending at the inner closing, the rest of the comment was code, and its `(` made the `}` that
    closes the function, below, a broken bracket that no suggestion could be."""
    commented = [f"    {opening} disabled:", f"       {opening} old {closing}", "       call(a,", f"    {closing}"]
    above = ["fn main() {", *commented, "    run();"]
    assert kept("}", above, syntax_for(language))
    assert not kept("    call(b]", above, syntax_for(language))  # past the outer closing, code again
    assert line_context(above[:3], syntax_for(language)).start.triple  # after the inner closing: still a comment


@pytest.mark.parametrize("line,above,language", [
    ("}", ["int main() {", "    /* a /* b */", "    call(a,"], "c"),  # C's do not nest: code after the first */
    ("}", ["func main() {", "    /* a /* b */", "    call(a,"], "go"),
])
def test_a_block_comment_where_they_do_not_nest_ends_at_its_first_closing(line, above, language):
    assert not kept(line, above, syntax_for(language))


@pytest.mark.parametrize("typed,after,inserted,kept_it,language", [
    ('    """Return the ', '"""', "width of the image.", False, "python"),  # an editor's closing quotes
    ('    """Return the ', '"""', 'width of the image."""', True, "python"),
    ("    the rest of it ", '"""', "and more.", False, "python"),  # the docstring's last line, from above
    ("    the rest of it ", " and more", "and the end.", True, "python"),  # the text after goes on in it too
    ("x = ", "compute()", '"""', False, "python"),
    ("const s = `hello ", "`;", "${name}", False, "javascript"),
    ("const s = `hello ", "`;", "${name}`;", True, "javascript"),
    ("g(a, /* note ", " */);", "c)", False, "javascript"),
    ("\tq := `SELECT ", "`", "1 FROM t", False, "go"),
    ("let s = r#\"a ", '"#;', "b", False, "rust"),
    ('echo "a ', '"', "b", False, "shellscript"),
])
def test_a_line_that_leaves_open_the_string_the_text_after_the_cursor_ends_is_refused(typed, after, inserted,
                                                                                        kept_it, language):
    """A suggestion replaces the line to its end: where the text after the cursor ends the string or comment the
    line is in (the `\"\"\"` an editor closes a docstring with), a line that leaves it open left the rest of the
    file a string once accepted."""
    above = ["def area(width, height):", *(['    """Sum it up:'] if typed.startswith("    the rest") else [])] \
        if language == "python" else []
    context = line_context(above, syntax_for(language))
    assert keep_suggestion(typed + inserted, inserted, after, context) is kept_it


@pytest.mark.parametrize("above", [["<?php $x = 1; ?>"], ["<html>"]])
def test_a_php_line_that_ends_in_html_leaves_nothing_open(above):
    """A line that closes PHP's tag ends in the HTML around the code, where a line may end: read as leaving a
    comment open that the text after the cursor (`</p>`, no `?>` yet) did not, `<p><?= $name ?></p>` was refused."""
    context = line_context(above, syntax_for("php"))
    assert keep_suggestion("<p><?= $name ?></p>", "me ?></p>", "</p>", context)
    assert not keep_suggestion("<p><?= $name /* ?></p>", "me /* ?></p>", "</p>", context)  # a comment left open


@pytest.mark.parametrize("line,above", [
    ("const x = foo(a;", []),  # a bracket closed with the wrong one
    ("const name = \"abc;", []),  # a string that never ends
    ("render(rows, opts", []),  # opens a call and leaves it, ending as no call that goes on does
    ("  items.map(x => x]", ["function f() {"]),
    ("}", ["run();"]),  # closes nothing, at the top of the file
    ("const half = total / 2 / (n;", []),  # divisions, not a regular expression
])
def test_broken_brackets_and_strings_are_refused_in_javascript(line, above):
    assert not kept(line, above, JS)



def _seconds_to_read(line: str, syntax) -> float:
    """The least of three timings of the filters reading `line` above the cursor."""
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        line_context([line], syntax)
        timings.append(time.perf_counter() - started)
    return min(timings)


def test_a_line_of_many_slashes_that_open_no_regular_expression_is_read_in_one_pass():
    """Each `/` where an operand may stand is matched as a regular expression to the line's end when it opens a
    character class that never closes: a 30,000-character line of `(/[` took seconds to read, a hundred times a
    line as long without the slashes, at every keystroke below it. It now costs about what that line does, and a
    regular expression on such a line still ends where it ends."""
    slashes, plain = "(/[" * 10_000, "(([" * 10_000
    assert _seconds_to_read(slashes, JS) < 10 * _seconds_to_read(plain, JS)
    read = scan(slashes + r" + (/a'/) + (/b\/c/) + 1 / 2 / (3", syntax=JS)  # the regular expressions after them
    assert read.stack == ["(", "["] * 10_000 + ["("] and not read.broken  # hold a quote and an escaped `/`


def test_a_line_of_many_nested_interpolations_is_read_in_one_pass():
    """Read a string at a time, a line of strings in interpolations in strings recursed once per quote: five
    thousand deep, a RecursionError, a traceback at every keystroke below it. It costs about what a line as long
    without them does, and a string nested less deep is still read as one."""
    ruby = syntax_for("ruby")
    nested = "x = " + '"#{' * 5000
    assert _seconds_to_read(nested, ruby) < 10 * _seconds_to_read("x = " + "(a)" * 5000, ruby)
    assert scan('x = "#{"#{"(a"}"}" (', syntax=ruby).stack == ["("]


SHELL = syntax_for("shellscript")


@pytest.mark.parametrize("line,above", [
    ("[ $# -eq 0 ] && echo ${#files[@]}  # none (given", []),  # `#` inside a word opens no comment
    ("  *.py) lint \"$f\" ;;", ["case $f in", "  *.md) ;;"]),  # a `case` pattern closes nothing
    ("  *.py) lint \"$f\" ;;", ["run() {", "  case $f in"]),  # ... nor what is open around it
    ("fi", ["run() {", "  if true; then", "    cat <<EOF", "it's (not) code", "EOF"]),  # a here-document's body
    ("it's ( prose", ["cat <<-'END' > out"]),
    ("  END", ["cat <<-'END' > out", "(", "  END"]),  # ... over, and an indented line repeated
    ("x=$(( n << 2 ))", []),  # a shift, not a here-document
    ("x=$(( n << bits ))", []),
    ("test_expect_success 'merges' '", []),  # a string that goes on over lines
    ("  git merge topic (", ["test_expect_success 'merges' '"]),  # inside it: anything
    ("sed 's/\\/\\\\/g' \"$f\"", []),  # no escape in single quotes
    ("  data=$(cat <<EOF", []),  # a here-document opened inside a command substitution
    ("}", ["f() {", "  data=$(cat <<EOF", "body (", "EOF)"]),  # ... the rest of its last line read on
    ("a ] b", ["cat <<\\EOF"]),  # <<\EOF, as quoted
    ("  ( cd \"$dir\"", []),  # a newline ends a command inside ( ) and { } too
    ("{ echo \"expected:\"", []),
    ('dir="$(dirname "$(readlink -f "$0")")"', []),  # quotes inside a command inside quotes nest
    ('command="`grep -E "^Exec(\\[[^]=]*])?=" "$file" | cut -d= -f 2-`"', []),  # in backquotes too
    ('  "$b")"', ['x="$(printf "%s" "$a"']),  # the command goes on over lines, then the string
])
def test_shell_scripts_are_read_as_the_shell_reads_them(line, above):
    assert kept(line, above, SHELL)


@pytest.mark.parametrize("line,above", [
    ("echo ${name)", []),  # a bracket closed with the wrong one
    ("}", ["echo ok"]),  # closes nothing, at the top of the file
    ("now=$(date]", []),
    ("echo ${name)", ["f() {"]),  # no case pattern inside ${...}
    ("echo ${x)", ["dirs=('C:\\' 'D:\\')"]),  # after single quotes, which no backslash escapes
    ("echo done) ]", ["echo 'it'\\''s ok'"]),  # a backslash outside quotes escapes a quote
    ("echo done) ]", ["echo it\\'s \\\"here"]),
    ("echo done) ]", ["cat <<EOF", "EOF is the word", "EOF"]),  # a body line that only begins with the word
    ('name="$(basename "$f"]"', []),  # a command in quotes closed by the wrong bracket
    ('echo done) ]', ['x="$(date)"']),  # the string and its command both closed: the line after is checked
    ('msg="\\$(" ]', []),  # an escaped $( opens nothing: the string closes, and `]` closes nothing
])
def test_broken_brackets_are_refused_in_shell_scripts(line, above):
    assert not kept(line, above, SHELL)


PERL = syntax_for("perl")


@pytest.mark.parametrize("line,above", [
    ("for my $i (0..$#array) {", []),  # `$#`, `$#{`: an array's last index, not a comment
    ("my @indexes = (0 .. $#{$self->{items}});  # each (", []),
    ('print "a # b (", \'#\';', []),  # a `#` inside strings
    ("my @paths = map { s#/+#/#gr } @given;  # squeezed (", []),  # `#` as a delimiter, then a comment
    ("my @notes = grep { /TODO #[({]/ } @lines;", []),  # ... and inside a regular expression
    ("it's ( prose", ["=head1 NAME"]),  # POD, to its `=cut`
    ("}", ["sub f {", "", "=pod", "", "it's (", "", "=cut", "", "  return 1;"]),
    ("it's ( prose", ["1;", "__END__", "data"]),  # no code after __END__ or __DATA__
    ("a ( b", ["__DATA__"]),
    ("my $s = 'C:\\\\';  my $q = \"say \\\"hi\\\" (\";", []),  # escapes in single and double quotes
    ("my $out = `ls -l (`;", []),  # backquotes
    ('my $usage = "Usage: $0 [options]', []),  # every Perl string may go on over lines
    ("  it's ( prose", ['my $usage = "Usage: $0 [options]']),
    ("my @names = qw(", []),  # a list of words over lines
    ("our @EXPORT_OK = qw(first second", []),  # ... its first words on the opening line
    ("}", ["sub f {", "  my @a = qw(", "    a ( b", "  );"]),  # ... closed, the code after it is read
    ("my $q = q{a {nested} ( text};", []),  # bracketing delimiters nest
    ("my $cmd = qx(ls -l) . qq<a <b> (> . qr!a(!i;", []),
    ("$s =~ s{(a)}{)}g;", []),  # a substitution's two parts
    ("$s =~ s{(a)} {)}gx; $t =~ s/(/)/;", []),
    ("$s =~ tr/a-z{/A-Z[/; $t =~ y/(//d;", []),
    ("if ($s =~ m{", []),  # a pattern that goes on over lines
    ("}", ["sub f {", "  if ($s =~ m{", "    [(] a }x) {", "  }"]),
    ("my @w = split /[(,]/, $line;", []),  # regular expressions where an operand stands
    ("my @hits = grep { /[(]/ } @lines;", []),
    ("print 1 if $x =~ /(\\w+)[(]/ and $y !~ /[)]/;", []),
    ("my $ok = $s ? /a(/ : /b[/;", []),  # the flags, a ternary's
    ("print <<\"EOF\";", []),  # here-documents
    ("it's ( prose", ["print <<\"EOF\";"]),
    ("}", ["sub f {", "  print <<'EOF';", "it's (", "EOF"]),
    ("}", ["sub f {", "  print $fh <<EOF . \"(\";", "body (", "EOF"]),
    ("}", ["sub f {", "  my $t = <<~EOT;", "    body (", "    EOT"]),  # indented
    ("}", ["sub f {", '  warn(<<"  ERR");', "body (", "  ERR"]),  # a word that holds spaces
    ("if ($] >= 5.008) {", []),  # punctuation variables: $], $", $(, $)
    ('local $" = ", ";', []),
    ("my $gid = $(;", []),
    ("my $egid = $);", []),
    ("sub max2 ($$) {", []),  # a prototype's `$)` closes its bracket
    ("my %point = (x => 1, y => 2, s => $p->{s}, q => $h{q});", []),  # words, not quote-like operators
    ("my $size = -s $file; $obj->y(1);", []),
    ("{   my $self = shift;", []),  # a block whose first statement stands on its line
    ("string => sub { my ($text) = @_;", []),
    ("if (defined $x and", []),  # word operators go on below
    ("my $bytes = 1 << 2;", []),  # a shift, not a here-document
    ("}", ["sub f {", "  is(render(<<'EOF'), 'x');", "a (", "EOF"]),  # a here-document in a call's call
    ("}", ["sub y {", "    return $_[0]{y};", "}", "sub clear {", "    my $self = shift;"]),  # a sub named y
    ("$dir =~ s=\\\\=/=g;", []),  # `=` as the delimiter (not `s => 1`)
    ("my $mid = $i++ / 2;", []),  # a division after a postfix ++, no regular expression
])
def test_perl_is_read_as_perl_reads_it(line, above):
    """Perl's comments, POD, quotes, quote-like operators, regular expressions, here-documents and punctuation
    variables hide brackets and quotes that would otherwise read as broken; and words that only look like its
    operators (`y =>`, `-s $file`) open nothing."""
    assert kept(line, above, PERL)


@pytest.mark.parametrize("line,above", [
    ("my $x = foo(1, 2;", []),  # a call left open by a statement's end
    ("my $x = foo(1, 2", []),  # ... or ending as no line that goes on does
    ("my %h = (a => 1];", []),  # a bracket closed with the wrong one
    ("}", ["my $x = 1;"]),  # closes nothing, at the top of the file
    ('die "Cannot open $file: $!;', []),  # a string that goes on over lines, opened by a statement that ends
    ("use POSIX qw(floor ceil;", []),  # ... a list of words too
    ("}", ["my @a = qw(", "  a b", ");"]),  # the list closed: the code after it is checked
    ("foo(;", ["=head1 NAME", "", "=cut"]),  # ... and after POD
    ("foo(;", ["print <<EOF;", "body (", "EOF"]),  # ... and after a here-document
    ("my $n = $#a + foo(;", []),  # `$#` opens no comment
    ("$p =~ s#a#b#; foo(;", []),  # nor does `#` as a delimiter
    ("my $r = $h{total} / $n; foo(;", []),  # a division opens no regular expression
    ("local $/ = undef; foo(;", []),  # nor does $/
    ("my $v = $]; foo(;", []),  # $] closes no bracket
    ("$s =~ s{a}{b}g; foo(;", []),  # the substitution ends at its second part
    ("my %point = (y => 1); foo(;", []),  # `y =>` opens no transliteration
    ("my %point = (y=>1, s=>2); foo(;", []),
])
def test_broken_perl_lines_are_dropped(line, above):
    """With Perl's rules the brackets and strings are checked: a bracket left open by a statement's end, a string
    opened on a line that ends as a statement (every Perl string may go on over lines, but the first line of a real
    one almost never ends in `;`), and code after what only looks like a comment, string or regex."""
    assert not kept(line, above, PERL)


def test_perl_quoted_text_nests_and_goes_on_over_lines():
    """The scan carries a quote-like operator's nesting, a substitution's second part and POD over lines, so the
    code after them is read as code."""
    assert scan("my @a = qw(\n  a b\n);\n(", syntax=PERL).stack == ["("]
    assert scan("q{a {b}\n} (", syntax=PERL).stack == ["("]  # nested braces over lines
    assert scan("s{a}\n  {b}x; (", syntax=PERL).stack == ["("]  # the second part on the next line
    assert scan("$x =~ /a\n b/x; (", syntax=PERL).stack == ["("]  # m/.../ after =~ goes on too
    assert scan("=head1 A\n(\n=cut\n(", syntax=PERL).stack == ["("]
    assert scan("=head1 A\n  =cut\n(", syntax=PERL).triple  # `=cut` ends POD only first on its line
    assert scan("__END__\n)", syntax=PERL).stack == [] and scan("__END__X\n(", syntax=PERL).stack == ["("]
    assert scan("ok(f(<<EOF));\n) [\nEOF\n(", syntax=PERL).stack == ["("]  # a here-document two calls deep
    assert scan("sub y { $_[0]{y} }\n(", syntax=PERL).stack == ["("]  # `sub y` names a sub


@pytest.mark.parametrize("line,above,language", [
    ("}", ["fn f() {", '    let json = r#"{"a": "\\"}"#;'], "rust"),  # a raw string, quotes and backslashes in it
    ("}", ["fn f() {", '    let s = r##"a"# ("##;'], "rust"),
    ('var p = @"C:\\dir\\"; f(p);', [], "csharp"),  # a verbatim string's backslash escapes nothing
    ('var p = $@"{root}\\"; f(p);', [], "csharp"),
    ("local s = [==[ a ]] ( ]==]", [], "lua"),  # long brackets of any level
    ("--[=[ a ( ]] note ]=]", [], "lua"),
    ("}", ["function f() {", "  $t = <<<EOT", "  it's (", "  EOT;"], "php"),  # a heredoc, its end indented
    ("    it's ( prose", ["def f", "  x = <<~EOS"], "ruby"),
    ("end", ["def f", "  x = <<-'EOS'", "it's (", "  EOS"], "ruby"),
    ("a ( note", ["=begin"], "ruby"),
    ("it's ( prose", ["text = <<'EOS'"], "ruby"),
    ("}", ["function f() {", "  foo(<<<EOT", "  body (", "  EOT);"], "php"),  # the call closes after the word
    ('last";', ["void F() {", '    string w = @"first line', '  ""q"" ('], "csharp"),  # "" in a verbatim string
    ("local s = [=====[ a ]] ( ]=====]", [], "lua"),
    ('let s = r#####"a"# ("#####;', [], "rust"),
    ('let p = r"C:\\temp\\"; f(p);', [], "rust"),  # raw, no escapes
    ("}", ["int f() {", '    auto s = R"(say "hi" (\\)";'], "cpp"),  # C++'s raw string: quotes, no escapes
    ("}", ["int f() {", '    auto q = R"sql(SELECT ")" (', 'FROM t)sql";'], "cpp"),  # over lines, to its )sql"
    ("  it's ( prose", ['const char *doc = u8R"--('], "cpp"),
])
def test_raw_strings_here_documents_and_long_brackets_are_read(line, above, language):
    assert kept(line, above, syntax_for(language))


@pytest.mark.parametrize("line,above,language", [
    ("end)", ["mask = 1<<BITS"], "ruby"),  # a shift, not a here-document: the lines after it are checked
    ("end)", ["t=begin_time"], "ruby"),  # =begin opens a comment only first on its line
    ("echo done) ]", ["x=$(( n << 2 ))"], "shellscript"),
])
def test_what_only_looks_like_a_here_document_or_comment_leaves_the_checks_on(line, above, language):
    assert not kept(line, above, syntax_for(language))


def test_a_here_document_ends_at_its_own_word_alone():
    assert scan("cat <<EOF\n(\nEOF\n(", syntax=SHELL).stack == ["("]
    assert scan("cat <<EOF\nEOFS (\n", syntax=SHELL).triple  # a longer word does not end it
    assert scan("a << b", syntax=syntax_for("ruby")).heredoc is None  # Ruby's append, not a here-document
    assert scan("x = <<<'EOT'\n(\nEOT;\n(", syntax=syntax_for("php")).stack == ["("]
    assert scan("cat <<< \"$x\" (", syntax=SHELL).heredoc is None  # a here-string


@pytest.mark.parametrize("line,above,language,keep", [
    ('  "homepage": "https://example.com/a(b",', ["{"], "json", True),  # no comment in JSON: `//` is text
    ('  "files": ["a", "b"}', ["{"], "json", False),
    ('  // the tests (and more', ["{"], "jsonc", True),  # settings.json, tsconfig.json
    ("div.note { background-color: #fffaf0;", [], "css", True),  # a block opened and filled on one line
    ('.x::after { content: ")" }', [], "css", True),
    (".x { color: red; ]", [], "css", False),
    ("  background: url(http://example.com/a.png);", [".x {"], "scss", True),  # `//` in a URL opens no comment
    ("  // widths (in rem", [".x {"], "scss", True),
    ("}", [".x {", "  background: url(//cdn.example.com/a.png);"], "scss", True),  # protocol-relative: no comment
    ("}", [".x {", "  background: url(//cdn.example.com/a.png);"], "less", True),
])
def test_data_and_style_sheets_get_their_brackets_and_strings_checked(line, above, language, keep):
    assert kept(line, above, syntax_for(language)) == keep


def test_a_quote_in_a_ruby_regular_expression_opens_no_string():
    """Ruby's strings go on over lines: a quote its regular expressions hold, read as opening one, made the rest
    of the method a string and the line after it code (`end)` kept, the method's `end` unchecked)."""
    ruby = syntax_for("ruby")
    above = ["def clean(s)", "  s = s.gsub(/[\"']/, '')", "  s.strip"]
    assert line_context(above, ruby).start.triple is None
    assert not kept("end)", above, ruby) and kept("end", above, ruby)
    assert scan("x = a / b; y = c / d; (", syntax=ruby).stack == ["("]  # divisions


@pytest.mark.parametrize("line,above,language,keep", [
    ("}", ["def f() {", "  def s = '''", "  a ( b", "  '''"], "groovy", True),  # Groovy's '''...'''
    ("  }", ["r = {", '  a = """', "  x ( y", '  """'], "elm", True),  # Elm's """..."""
    (");", ["INSERT INTO t VALUES ('first", "second (draft)', 1);"], "sql", False),  # SQL's strings go on
    ("}", ["m = %{", "  r: ~r/\\(/,"], "elixir", True),  # Elixir's sigils
    ("  x: 1]", ["m = %{", "  s: ~s(a \"b),"], "elixir", False),
    ("}", ["m = %{", "  p: ?(,"], "elixir", True),  # and its character literals
    ("  x: 1]", ["m = %{", '  q: ?",'], "elixir", False),
    ("}", ["h = {", '  a: "#{x["k ("]}",'], "ruby", True),  # strings inside an interpolation
    ("}", ["m = %{", '  a: "#{f("b (")}",'], "elixir", True),
    ("]", ["v = [", '  "$(f("b ("))",'], "julia", True),
    ("}", ["fun f() {", '    val s = "${m["k ("]}"'], "kotlin", True),
    ("}", ["void f() {", '  var s = "${m["k ("]}";'], "dart", True),
    ("}", ["def f() {", '  def s = "${m["k ("]}"'], "groovy", True),
    ("}", ["func f() {", '    let s = "\\(d["k ("]!)"'], "swift", True),
    ("end)", ["case x", '  when /"/ then 1'], "ruby", False),  # a regular expression after `when`
    ("]", ["v = [", "  `echo (`,"], "julia", True),  # Julia's commands
    ("echo a ]", ["echo $'it\\'s'"], "shellscript", False),  # the shell's $'...', where a backslash escapes
    ("<?php } ?>", ["<?php if ($items) { ?>", "<p>Items (new:</p>"], "php", True),  # HTML between PHP's tags
    ("echo $n);", ["<?php $n = 1; ?>", "<p>'90s music</p>", "<?php"], "php", False),
    ("echo 1);", ["<p>'90s music</p>", "<?php if ($x) {"], "php", False),  # the HTML a template starts with
    ("}]", ["<?php", "if ($x) {"], "php", False),  # the file's code from its `<?php` on
])
def test_strings_each_language_has_are_read_as_strings(line, above, language, keep):
    """Read as code, the text of these strings opened brackets that the right closer then broke (a `}` dropped),
    closed what a stray closer below was kept for, or began a string that made the lines below prose."""
    assert kept(line, above, syntax_for(language)) is keep


@pytest.mark.parametrize("language", ["javascript", "typescriptreact"])
def test_a_template_inside_a_templates_expression_is_a_string(language):
    """`${...}` in a template holds code, and a template in it is a string again: read as ending at the inner
    template's opening backquote, the outer one left its text code, whose `(` made the function's `}` a broken
    bracket (dropped) and kept a stray `)` below as closing it."""
    syntax = syntax_for(language)
    above = ["function list(items) {", "  const html = `<ul>${items.map((x) => `<li>${x} (</li>`)}</ul>`;"]
    assert kept("}", above, syntax) and not kept("  go(html));", above, syntax)
    assert kept("  const s = `${a}${b}`;", [], syntax) and not kept("  const s = `${f(a}`;", [], syntax)


def test_a_raw_string_of_cpp_ends_only_at_its_own_delimiter():
    cpp = syntax_for("cpp")
    assert scan('auto s = R"x(a)" )x" + f(', syntax=cpp).stack == ["("]
    assert scan('R"x(\n)y"\n', syntax=cpp).triple == ')x"'
    assert scan('R"a b(" + f(', syntax=cpp).stack == ["("]  # no raw string (a space in its delimiter): a string
    assert not kept('auto s = R"(a)" + g(;', [], cpp)  # closed, so the code after it is checked
    assert scan('R"(\n', syntax=syntax_for("c")).triple is None  # C has no raw string: a string left open


def test_each_language_reads_its_own_strings_and_comments():
    assert kept("fn first<'a>(x: &'a str) -> &'a str {", [], RUST)  # a quote marks a lifetime in Rust
    assert not kept("fn first<'a>(x: &'a str) -> &'a str {", [], JS)
    assert scan("x := `raw (\nstring`", syntax=GO).stack == []  # Go's raw strings go on over lines
    assert scan("s = '''(\n'''", syntax=PYTHON).stack == []
    assert scan("# (", syntax=PYTHON).stack == [] and scan("# (", syntax=JS).stack == ["("]
    assert scan("-- (", syntax=syntax_for("sql")).stack == []
    assert scan("f' '(' = 1", syntax=syntax_for("haskell")).stack == []  # a prime, then a character literal
    assert kept("#endif", ["#if A", "#if B", "#endif"], syntax_for("c"))  # nested conditionals end together
    assert kept("<<<< ))) '", [], NEUTRAL) and syntax_for("markdown") is NEUTRAL  # no rule known: none applied
    assert kept("<<<< ))) '", [], syntax_for("shellscript"))  # its `case` patterns close what they never opened


def test_a_document_that_names_no_language_gets_no_languages_rules_in_the_engine_and_the_server():
    """The server judges its own lines (the line after copies of the lines above) by syntax_for(doc.language);
    the engine, told the same id, must judge the model's lines alike."""
    from completer.engine import Engine

    assert syntax_for("") is NEUTRAL and syntax_for(None) is PYTHON
    engine = Engine()
    engine.set_language("file:///a", "")
    assert engine._syntax("file:///a") is NEUTRAL and engine._syntax("file:///b") is PYTHON
    engine.set_language("file:///a", None)
    assert engine._syntax("file:///a") is PYTHON


def test_python_keeps_its_own_rules():
    assert not kept("if x", [], PYTHON) and not kept("  x = 1", [], PYTHON)
    assert not kept("    )", ["f(", "    g(", "        x", "    )"], PYTHON)  # the line above again
    assert not kept("go(a, b);", ["go(a, b);"], JS)  # a line of code repeated is dropped everywhere
    assert not kept(".append(x)", [], PYTHON) and syntax_for(None) is PYTHON


def test_a_closer_may_close_what_opened_above_text_that_was_clipped():
    """The text above the cursor is clipped to MAX_CONTEXT_CHARS, so fewer than CONTEXT_LINES long lines may be
    all there is of a long file: a closer with nothing open in them is kept."""
    java = syntax_for("java")
    long_lines = ["    private static final String FIELD_%03d = \"%s\";" % (i, "x" * 60) for i in range(260)]
    assert kept("}", long_lines, java)  # 260 lines of 100 characters: more than half the clip, so clipped
    assert not kept("}", long_lines[:20], java)  # a short file, whole: `}` closes nothing


def test_the_line_after_enter_is_searched_at_the_documents_own_indentation():
    two = "function f() {\n  if (a) {\n    go();\n  }\n}\n"
    assert indent_unit(two) == "  " and indent_unit("class A {\n\tint x;\n}\n") == "\t"
    assert next_line_indents("  if (ready) {", two, JS) == ["    ", "      "]
    assert next_line_indents("  go();", two, JS) == ["  ", ""]  # the same, or a closing brace's level
    assert next_line_indents("\tint x = 1;", "class A {\n\tint y;", syntax_for("java")) == ["\t", ""]
    assert next_line_indents("  if x:", "", PYTHON) == ["      "]  # Python's: a colon opens a block
    assert next_line_indents("  - item", "", NEUTRAL) == ["  "]
    go_above = "func main() {\n\tx := 1\n"
    assert next_line_indents("\tcall(a,", go_above, GO) == ["\t\t", "\t"]  # tabs align by a level, not a column


def test_the_line_after_a_statement_over_several_lines_starts_at_the_statements_indentation():
    """A line that closes brackets opened above ends a statement that began there: the next line starts at that
    statement's indentation, as in Python, not under the closing line's alignment."""
    above = "function f() {\n  const total = sum(first,"
    assert next_line_indents("                    second);", above, JS) == ["  ", ""]
    assert next_line_indents("      ready) {", "function f() {\n  if (loaded &&", JS) == ["    ", "      "]
    assert next_line_indents("\t\tb int) {", "func f() {\n\tgo func(a int,", GO) == ["\t\t", "\t\t\t"]
    assert next_line_indents("  });", "function f() {\n  run(() => {\n    go();", JS) == ["  ", ""]


def test_the_statement_a_line_ends_is_looked_for_among_the_lines_above_within_a_bounded_text():
    """Each line further up is read again with all the lines below it, until the brackets the line closes are
    found open: under forty lines of a thousand unclosed brackets, the search ahead after a `)` read them twenty
    times over (more than a second) whenever the user paused. Only the last STATEMENT_CHARS characters are read,
    now: less than reading the lines above once."""
    above = "\n".join(["(" * 1000] * 40)
    started = time.perf_counter()
    scan(above, syntax=PYTHON)
    once = time.perf_counter() - started
    for syntax in (PYTHON, JS):
        started = time.perf_counter()
        next_line_indents(")", above, syntax)
        assert time.perf_counter() - started < 5 * once
    assert next_line_indents("         3):", "class A:\n    def f(a,\n          b,", PYTHON) == ["        "]
    assert next_line_indents("     3);", "function f() {\n  go(1,\n     2,", JS) == ["  ", ""]  # still found


@pytest.mark.parametrize("line,above,language,expected", [
    ("  if ready then", "function f()\n  x = 1", "lua", ["    ", "  "]),
    ("  for i = 1, #t do", "function f(t)\n  x = 1", "lua", ["    ", "  "]),
    ("local function add(a, b)", "", "lua", ["    ", ""]),  # four spaces: no step above
    ("  if a then b() end", "function f()\n  x = 1", "lua", ["  ", ""]),  # a block on one line
    ("  for f in *.py; do", "main() {\n  x=1", "shellscript", ["    ", "  "]),
    ("if [ -f x ]; then  # a note", "", "shellscript", ["    ", ""]),
    ("echo done", "", "shellscript", [""]),
    ("  items.each do |item|", "def f\n  x = 1", "ruby", ["    ", "  "]),
    ("  def name", "class A\n  x = 1", "ruby", ["    ", "  "]),
    ("  return if done", "def f\n  x = 1", "ruby", ["  ", ""]),  # a modifier, not a block
    ("  def name; end", "class A\n  x = 1", "ruby", ["  ", ""]),
])
def test_the_line_after_a_keyword_that_opens_a_block_is_searched_one_level_deeper(line, above, language, expected):
    """Editors indent after Lua's `then` and `do`, the shell's `then` and `do`, Ruby's `def` and `do |x|`, as
    after `{`; the search ahead guessed the same indentation, so its answer served no keystroke."""
    assert next_line_indents(line, above, syntax_for(language)) == expected


def test_a_file_names_its_language():
    assert language_of_path("src/app.tsx") == "typescriptreact" and language_of_path("x.unknown", "py") == "py"
    assert language_of_path("lib/util.mts") == "typescript" and language_of_path("k/reduce.cuh") == "cuda-cpp"


@pytest.mark.parametrize("uri,filetype,language", [
    ("file:///src/configure", "sh", "shellscript"), ("file:///home/me/.bashrc", "bash", "shellscript"),
    ("file:///home/me/.zshrc", "zsh", "shellscript"), ("file:///src/View.m", "objc", "objective-c"),
    ("file:///src/kernel.cu", "cuda", "cuda-cpp"), ("file:///src/App.cs", "cs", "csharp"),
])
def test_a_neovim_filetype_gets_its_languages_rules_whatever_the_files_name(uri, filetype, language):
    from lsp.documents import DocumentStore

    doc = DocumentStore().open(uri, filetype, 1, "echo ok\n")
    assert doc.language == language and syntax_for(doc.language) is syntax_for(language) is not NEUTRAL


def test_a_converted_bundle_writes_every_language_and_ours_python(tmp_path):
    def bundle(manifest: dict) -> Bundle:
        return Bundle(tmp_path, manifest)

    assert bundle({}).languages == ("python",)
    assert bundle({"conversion": {"command": "completer convert x --out y"}}).languages == ("*",)
    assert bundle({"conversion": {}, "defaults": {"languages": ["python"]}}).languages == ("python",)
    assert bundle({"defaults": {"languages": "python"}}).languages == ("python",)  # malformed: as if not there


JS_DOCUMENT = ("loadConfig(path);  // the defaults\nconsole.log('ready');  // don't wait\n\n"
               "loadConfig(path);  // the defaults\n")


def _first_line(client: RawClient, uri: str) -> str | None:
    items = client.completion(uri, 4, 0)["result"]
    items = items.get("items", []) if isinstance(items, dict) else items or []
    return items[0]["textEdit"]["newText"] if items else None


def test_the_server_follows_a_javascript_documents_rules(tmp_path):
    """The line that followed the copy of the line above is offered first: under Python's rules its comment's
    apostrophe would open a string and drop it."""
    from lsp_support import SERVER_CMD, server_env

    uri = (tmp_path / "main.js").as_uri()
    with RawClient(SERVER_CMD, env=server_env()) as client:
        client.initialize({"enabledLanguages": ["javascript"], "searchAhead": False})
        client.open(uri, JS_DOCUMENT, language_id="javascript")
        assert _first_line(client, uri) == "console.log('ready');  // don't wait"
        info = client.request("completer/info")["result"]
        assert info["languages"] == ["python"] and info["server"]["enabled_languages"] == ["javascript"]


def test_a_line_the_model_indents_in_a_document_indented_with_tabs_is_indented_with_tabs(tmp_path):
    """The engine reads a tab as four spaces (as its corpus was cleaned); what it indents at a line's start goes
    back to the document as tabs (gofmt's Go, a Makefile, a tab-indented Python file)."""
    from lsp_support import SERVER_CMD, server_env

    uri = (tmp_path / "total.py").as_uri()
    document = "import os\n\n\ndef total(rows):\n\tcount = 0\n\tfor row in rows:\n\t\tcount += row\n\n"
    with RawClient(SERVER_CMD, env=server_env()) as client:
        client.initialize({"searchAhead": False})
        client.open(uri, document)
        lines = [item["textEdit"]["newText"] for item in client.completion(uri, 7, 0)["result"]["items"]]
        indentations = [line[:len(line) - len(line.lstrip())] for line in lines]
        assert any(indentations) and not any(" " in indentation for indentation in indentations), lines


def test_the_line_that_follows_a_copy_above_is_indented_with_tabs_in_a_tab_indented_document(tmp_path):
    """The line after the copy of the lines above is read from the document with tabs as spaces, as the engine
    reads it: put first on an empty line, it came back in spaces, beside the same line in tabs."""
    from lsp_support import SERVER_CMD, server_env

    uri = (tmp_path / "widgets.py").as_uri()
    document = ("def load(path):\n\tblob = frobnicate_payload(path)\n\tif blob:\n"
                "\t\tregister_zq_widget(blob, priority=7)\n\treturn blob\n\n\n"
                "def save(path):\n\tblob = frobnicate_payload(path)\n\tif blob:\n\n")
    with RawClient(SERVER_CMD, env=server_env()) as client:
        client.initialize({"searchAhead": False})
        client.open(uri, document)
        items = client.completion(uri, 10, 0)["result"]["items"]
        assert items[0]["textEdit"]["newText"] == "\t\tregister_zq_widget(blob, priority=7)", items
        assert not any(item["textEdit"]["newText"].startswith(" ") for item in items), items


def test_a_python_file_opened_while_the_worker_starts_is_prefilled(tmp_path):
    """With enabledLanguages unset the languages are the model's, unknown until the worker is up; Python, which
    every model writes, is not kept waiting for it."""
    import time

    from lsp_support import SERVER_CMD, server_env

    uri = (tmp_path / "main.py").as_uri()
    with RawClient(SERVER_CMD, env=server_env()) as client:
        client.initialize({"searchAhead": False})
        client.open(uri, "import os\n\n\ndef main(argv):\n    return 0\n" * 20)
        deadline = time.monotonic() + 30
        while not client.request("completer/info")["result"].get("documents_cached"):
            assert time.monotonic() < deadline, "the document opened at start was never prefilled"
            time.sleep(0.2)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    pytest.importorskip("transformers")  # the test extra installs it; CI fails on a skip (scripts/test.sh)
    from hf_models import checkpoint

    from completer.cli import main as cli_main

    root = tmp_path_factory.mktemp("converted")
    checkpoint(root / "src", "qwen2", tied=True)
    assert cli_main(["convert", str(root / "src"), "--out", str(root / "bundle")]) == 0
    return root / "bundle"


def test_a_converted_model_answers_in_every_language_and_the_embedded_one_in_python(converted, tmp_path):
    from lsp_support import SERVER_CMD, server_env

    uri = (tmp_path / "main.js").as_uri()
    for options, answers in (({}, False), ({"modelPath": str(converted)}, True),
                             ({"modelPath": str(converted), "enabledLanguages": ["python"]}, False)):
        with RawClient(SERVER_CMD, env=server_env()) as client:
            client.initialize({**options, "searchAhead": False})
            client.open(uri, JS_DOCUMENT, language_id="javascript")
            first = _first_line(client, uri)
            info = client.request("completer/info")["result"]
            assert info["server"]["requests"] == int(answers), options  # the language off: never searched
            assert (first == "console.log('ready');  // don't wait") is answers, (options, first)
            assert info["server"]["enabled_languages"] == (["*"] if options == {"modelPath": str(converted)}
                                                           else ["python"])
    manifest = json.loads((converted / "manifest.json").read_text())
    assert "languages" not in manifest["defaults"] and "conversion" in manifest


def test_a_model_trained_on_python_alone_is_converted_for_python(converted, tmp_path, capsys):
    from completer.bundle import load_bundle
    from completer.cli import main as cli_main

    source = converted.parent / "src"
    out = tmp_path / "python-only"
    assert cli_main(["convert", str(source), "--out", str(out), "--languages", "python, python"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert load_bundle(out).languages == ("python",) and manifest["conversion"]["command"].endswith(
        "--languages python")
    assert "suggestions in python." in (out / "MODEL.md").read_text()
    assert cli_main(["convert", str(source), "--out", str(tmp_path / "all"), "--languages", "Python,*"]) == 0
    assert load_bundle(tmp_path / "all").languages == ("python", "*")  # LSP's ids are lower case
    assert "--languages 'python,*'" in json.loads((tmp_path / "all" / "manifest.json").read_text())["conversion"][
        "command"]  # quoted: a shell running the command again does not expand it
    assert cli_main(["convert", str(source), "--out", str(tmp_path / "x"), "--languages", " , "]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("completer convert: --languages ' , '")
    assert not (tmp_path / "x").exists()


def test_the_keep_rate_script_judges_real_files_by_both_rules(tmp_path):
    import filter_keep_rate  # scripts/ is on the path (conftest.py)

    out = tmp_path / "rate.json"
    assert filter_keep_rate.main(["--languages", "python", "javascript", "--positions", "300", "--out", str(out)]) == 0
    result = {r["language"]: r for r in json.loads(out.read_text())["results"]}
    assert result["python"]["positions"] == 300 and result["python"]["kept"] == result["python"]["kept_by_python_rules"]
    javascript = result["javascript"]  # the extension's npm packages: scripts/test.sh installs them
    assert javascript["positions"] == 300 and javascript["kept"] > javascript["kept_by_python_rules"]


def test_a_document_takes_workspace_lines_only_from_files_of_its_own_language(converted, tmp_path):
    """A model that writes every language gets the workspace's files of every language indexed, and a document
    its context from those of its own language and family alone: a new JavaScript file is offered the JavaScript
    files' header, never the Python files' `#` one, and a new Python file the Python one; a Go file, whose
    language no file of the workspace is in, neither."""
    import os
    import time

    from lsp_support import SERVER_CMD, server_env

    header = "# SPDX-License-Identifier: Apache-2.0 OR MIT"
    script_header = "// SPDX-License-Identifier: Apache-2.0 OR MIT"
    for i in range(3):
        (tmp_path / f"part{i}.py").write_text(f"{header}\n\n\ndef part_{i}():\n    return {i}\n")
        (tmp_path / f"part{i}.{'ts' if i else 'js'}").write_text(f"{script_header}\n\nexport const part{i} = {i};\n")
    with RawClient(SERVER_CMD, env=server_env()) as client:
        client.request("initialize", {"processId": os.getpid(), "rootUri": tmp_path.as_uri(), "capabilities": {},
                                      "initializationOptions": {"completer": {"modelPath": str(converted),
                                                                              "searchAhead": False}}})
        client.notify("initialized", {})
        time.sleep(1)  # the index is built on a thread
        for name, language, first in (("new.js", "javascript", script_header), ("new.py", "python", header),
                                       ("new.go", "go", None)):
            uri = (tmp_path / name).as_uri()
            client.open(uri, "", language_id=language)
            lines = [item["textEdit"]["newText"] for item in client.completion(uri, 0, 0)["result"]["items"]]
            assert header not in lines[1:] and script_header not in lines[1:], (language, lines)
            assert (lines[:1] == [first]) if first else not {header, script_header} & set(lines), (language, lines)
