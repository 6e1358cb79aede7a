"""What the filters and the search ahead know of a document's language: its comments and strings, and whether
Python's statement rules apply.

The embedded models write Python, and every rule in filters.py and indentation.py was made for it. A converted
model (completer convert) writes most languages, so a document's language decides which rules hold: Python's
own; for the languages below, only the lexical ones (brackets that close what they open, strings that end, a
line that leaves a bracket open ending the way a construct that goes on does), read past their comments and
strings; for any other language no lexical rule, since a rule read from the wrong language drops good lines.
The rules of no language (a blank addition, the line above again, deeper than the typed indentation) hold in
all of them.
"""
from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

PYTHON_NAME = "python"


@dataclass(frozen=True)
class Syntax:
    """A language's lexical rules, as far as the filters read them."""

    name: str
    lexical: bool = True  # brackets and strings are checked; False: no lexical rule of the language is known
    statements: bool = False  # Python's statement rules (filters.statement_can_start/end, indentation.py)
    line_comments: tuple[str, ...] = ()
    block_comments: tuple[tuple[str, str], ...] = ()  # (opening, closing), the longest opening first
    nested_comments: bool = False  # a block comment's opening inside one opens another (Rust's /* a /* b */ c */)
    quotes: str = "\"'"  # strings that end on their own line
    multiline_quotes: str = ""  # of `quotes`, those whose strings may also go on over lines (Rust's "a<newline>b"):
    # the lines below read as the string's until it ends; a suggested line that leaves one open is still refused,
    # since a model's line that does so has far more often lost its closing quote than begun such a string
    raw_quotes: tuple[str, ...] = ()  # the quotes and long strings' closers a backslash cannot escape (shell's ')
    raw_prefixes: tuple[str, ...] = ()  # letters before a quote that make its string raw (Rust's r"C:\")
    delimited_raw: tuple[str, ...] = ()  # letters before a quote that open `"x(`, closed by `)x"` (C++'s R"x(...)x")
    doubled_quotes: tuple[str, ...] = ()  # long strings' closers that stand for themselves when doubled (C#'s @"a""b")
    bare_escapes: bool = False  # a backslash outside strings escapes the next character (the shell's \')
    quoted_commands: bool = False  # in "...", `$(` and a backquote open a command whose quotes nest ("$(f "$x")")
    template_expressions: bool = False  # in `...`, `${` opens an expression whose quotes nest (`${f(`a`)}`)
    interpolation: str = ""  # in "...", what opens code up to its bracket's closer, whose own strings are read as
    # strings (Ruby's "#{h["a ("]}", Julia's "$(f(")"))")
    long_strings: tuple[tuple[str, str], ...] = ()  # (opening, closing) of strings that may go on over lines
    long_escapes: bool = True  # a backslash escapes a long string's closing quote (not in raw strings: Go's `...`)
    string_prefixes: tuple[str, ...] = ()  # letters a quote may follow and still open a string (Dart's r'...')
    char_literals: bool = False  # a quote opens only a one-character literal ('x', '\n'); else it is a lifetime,
    # a prime, an adjoint
    not_comment: str | None = None  # a pattern, at a line comment's marker, of what only looks like one
    regex_literals: bool = False  # `/.../` where an operand may stand is a regular expression (JavaScript)
    heredoc: str | None = None  # a pattern, at `<`, of what opens a here-document; its group `word` ends it
    stray_closers: str = ""  # closers that may stand with nothing to close (the shell's `case` patterns `a)`)
    open_ends: bool = True  # a line that leaves a bracket open ends as one that goes on does (an opener, a comma,
    # an operator); False where idiom leaves calls and clauses open otherwise (Lua's `f(t, function(a)`, SQL's
    # `(CASE`, Haskell's leading commas)
    forgotten_quotes: bool = False  # a line ending in `;` inside a string that it opened and that may go on over
    # lines forgot the string's closing quote (Perl's `die "no such file;`): such a string's first line rarely does
    dangling_words: tuple[str, ...] = ()  # words a line that leaves a bracket open may end with (Perl's `and`)
    braced_statements: bool = False  # a line that leaves a `{` innermost may end with a `;` (Perl's `{ my $x = 1;`)
    name_chars: str = ""  # characters a name may hold besides letters, digits and _ (JavaScript's $, CSS's -)
    block_opener: str | None = None  # a pattern, searched in a line's code, of a keyword that opens a block
    # (Lua's `then`, Ruby's `do |x|`): editors indent the line after it, as after `{`
    regex_after: str | None = None  # with regex_literals, a pattern, searched in the code before a `/`, of what a
    # regular expression may follow (Perl's `=~`, `split`), where it is read as a quote-like m/.../ (first on its
    # line, only if it ends there: not the division of `/ $n` continuing a line); None: JavaScript's rules
    quote_like: str | None = None  # a pattern, at a word's start or a `~`, of an operator and the delimiter after
    # it that quotes text to the matching delimiter, bracketing pairs nested (Perl's qw(a b), q{a {b}}, Elixir's
    # sigils ~r/a/, ~s(a)), two characters at least; its group `twice`, of an operator whose text has two parts
    # (s/a/b/, s{a} {b})
    variable: str | None = None  # a pattern, at one of `variable_marks`, of a variable whose name is a quote, bracket
    # or `#` (Perl's $", $], $#array; the shell's $'...'): no string, bracket or comment
    variable_marks: str = "$"  # what a `variable` starts with (Elixir's `?` of its character literals `?(`, `?"`)
    pod: bool = False  # Perl's documentation: a line starting `=` and a letter opens it, a line starting `=cut`
    # closes it
    end_of_code: tuple[str, ...] = ()  # lines after which the file holds no code (Perl's __END__, __DATA__)
    file_opens_in: str | None = None  # what ends the text a file starts in, read as a comment's (PHP's HTML, to its
    # first `<?`)
    special: re.Pattern[str] = field(init=False, repr=False, compare=False)  # where scanning must look
    not_comment_at: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    heredoc_at: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    opens_block: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    regex_follows: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    variable_at: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    line_blocks: bool = field(init=False, repr=False, compare=False)  # pod or end_of_code: line starts are read
    escaping_quotes: bool = field(init=False, repr=False, compare=False)  # no raw quote or prefix: a fast path

    def __post_init__(self) -> None:
        starts = {"\n", "(", ")", "[", "]", "{", "}", *self.quotes}
        if self.statements:
            starts.add(":")  # Python's block colon (Scan.top_colon)
        starts.update(marker[0] for marker in (*self.line_comments, *(opening for opening, _ in self.long_strings)))
        starts.update(opening[0] for opening, _ in self.block_comments)
        if self.heredoc:
            starts.add("<")
        if self.bare_escapes:
            starts.add("\\")
        if self.regex_literals:
            starts.add("/")
        if self.char_literals:
            starts.add("'")
        if self.variable:
            starts.update(self.variable_marks)
        special = "[" + "".join(map(re.escape, sorted(starts))) + "]"
        if self.quote_like:
            special += "|" + self.quote_like  # found at the operator's first character
        object.__setattr__(self, "special", re.compile(special))
        object.__setattr__(self, "not_comment_at", re.compile(self.not_comment) if self.not_comment else None)
        object.__setattr__(self, "heredoc_at", re.compile(self.heredoc) if self.heredoc else None)
        object.__setattr__(self, "opens_block", re.compile(self.block_opener) if self.block_opener else None)
        object.__setattr__(self, "regex_follows", re.compile(self.regex_after) if self.regex_after else None)
        object.__setattr__(self, "variable_at", re.compile(self.variable) if self.variable else None)
        object.__setattr__(self, "line_blocks", self.pod or bool(self.end_of_code))
        object.__setattr__(self, "escaping_quotes", not self.raw_quotes and not self.raw_prefixes)


def _same(*delimiters: str) -> tuple[tuple[str, str], ...]:
    """Long strings each closed by the delimiter that opens it."""
    return tuple((delimiter, delimiter) for delimiter in delimiters)


PYTHON = Syntax(PYTHON_NAME, statements=True, line_comments=("#",), long_strings=_same('"""', "'''"),
                long_escapes=False)
NEUTRAL = Syntax("", lexical=False)

_C = {"line_comments": ("//",), "block_comments": (("/*", "*/"),)}
_C_PREFIXES = ("L", "u", "U", "u8", "R")  # wide, Unicode and raw literals
_CPP_RAW = ("R", "LR", "uR", "UR", "u8R")  # R"(C:\dir)", R"sql(SELECT ")")sql", which may go on over lines
_ML = {"line_comments": ("--",), "block_comments": (("{-", "-}"),), "nested_comments": True, "quotes": '"',
       "char_literals": True, "open_ends": False}
LEVELS = 6  # long brackets and raw strings of up to this many = or # are read: [=====[ ]=====], r#####"..."#####
_LUA_BRACKETS = tuple((f"[{'=' * level}[", f"]{'=' * level}]") for level in range(LEVELS - 1, -1, -1))
_SHELL_HEREDOC = r"(?<!<)<<-?[ \t]*\\?(?P<quote>['\"]?)(?P<word>[A-Za-z_]\w*)(?P=quote)"  # <<EOF, <<-'EOF', <<\EOF
_RUBY_HEREDOC = (r"(?<![\w)\]])<<(?:[~-]?(?P<quote>['\"`])(?P<word>[A-Za-z_]\w*)(?P=quote)|[~-](?P<dashed>[A-Za-z_]\w*)"
                 r"|(?P<bare>[A-Z_][A-Z0-9_]*)\b)")  # <<~EOS, <<-EOS, <<'EOS', <<EOS; not the shift 1<<BITS
_LUA_BLOCK = r"(?:\b(?:then|do|else|repeat)|\bfunction\b[\w.: ]*\([^()]*\))$"  # not `if a then b() end`
_SHELL_BLOCK = r"(?:^|[;&|\s])(?:then|do|else)$|^case\b.*\bin$"
_RUBY_BLOCK = (r"^(?:def|class|module|if|unless|while|until|case|begin|else|elsif|when|rescue|ensure|for)\b(?!.*\bend$)"
               r"|\bdo(?:\s*\|[^|]*\|)?$")  # not the modifier `x if y`, nor `def f; end`
_PERL_HEREDOC = (r"(?<![\w)\]}$@%])<<(?:~?[ \t]*(?P<quote>['\"`])[ \t]*(?P<word>[^'\"`\n]+)(?P=quote)"
                 r"|~?\\?(?P<bare>[A-Za-z_]\w*))")  # <<"EOF", <<'EOF', <<~EOF, <<EOF; not the shift 1<<BITS
_PERL_QUOTE_LIKE = (r"(?<![\w$@%&*#\\-])(?<!->)(?<!::)(?<!\bsub\s)(?:(?P<twice>s|tr|y)|q[qwrx]?|m)"
                    r"(?:[^\w\s=;)\]}>]|=(?!>)|[ \t]+[^\w\s#=,;)\]}>])")  # not $s, -s $file, ->s(, $h{s}, y=>1, sub y
_PERL_REGEX_AFTER = (r"(?:[(,=!~:\[&|?{;*%^<>.]|(?<![+-])[+-]|(?<![\w$@%>:])(?:split|grep|map|and|or|not|if|unless"
                     r"|while|until|return|when))$")  # an operator, a keyword: not `}` (`$h{n} / 2`) nor `$i++`
_PERL_VARIABLE = r"(?<![(;\\$@%&*])\$\)|\$(?:\$|[#'\"`(\[\]])"  # $", $], $(, $#a, $), `$$` as one; not ($)
_PERL_OPERATORS = ("and", "or", "xor", "not", "eq", "ne", "lt", "gt", "le", "ge", "cmp", "x", "isa")
_ELIXIR_SIGIL = r"~[A-Za-z]\w*(?:[/|(\[{<]|(?P<quote>[\"'])(?!(?P=quote){2}))"  # ~r/a/, ~s(a), ~S"a"; not ~S"""
_RUBY_REGEX_AFTER = (r"(?:[(,=!~:\[&|?{;*%^<>+-]|(?<![\w$@])(?:when|if|unless|elsif|while|until|and|or|not"
                     r"|return|then|split|scan|match|sub|gsub|index))$")  # not `a / b`, `f(x) / 2`
_HASKELL_SYMBOL = r"[!#$%&*+./<=>?@\\^|~:]"
_HASKELL_OPERATOR = rf"(?<={_HASKELL_SYMBOL})--|--+{_HASKELL_SYMBOL}"  # `-->`, `|--`: operators, not comments
_RUST_RAW = tuple(("#" * level + '"', '"' + "#" * level) for level in range(LEVELS - 1, 0, -1))  # r#"..."#
_BY_LANGUAGE = {
    **{name: Syntax(name, **_C, long_strings=_same("`"), template_expressions=True, regex_literals=True,
                    name_chars="$")
       for name in ("javascript", "javascriptreact", "typescript", "typescriptreact")},
    "go": Syntax("go", **_C, long_strings=_same("`"), long_escapes=False),
    "java": Syntax("java", **_C, long_strings=_same('"""')),
    "groovy": Syntax("groovy", **_C, long_strings=_same('"""', "'''"), interpolation="${"),
    "swift": Syntax("swift", **_C, nested_comments=True, long_strings=_same('"""'), interpolation="\\("),
    "kotlin": Syntax("kotlin", **_C, nested_comments=True, long_strings=_same('"""'), long_escapes=False,  # raw
                     interpolation="${"),
    "scala": Syntax("scala", **_C, nested_comments=True, long_strings=_same('"""'), long_escapes=False),
    "csharp": Syntax("csharp", **_C, long_strings=(*_same('"""'), ('@"', '"'), ('@$"', '"')), long_escapes=False,
                     doubled_quotes=('"',)),
    # its raw and verbatim strings (@"C:\dir\", $@"..." too: scanning meets the @ first)
    "dart": Syntax("dart", **_C, nested_comments=True, long_strings=_same('"""', "'''"), string_prefixes=("r",),
                   interpolation="${"),
    **{name: Syntax(name, **_C, string_prefixes=_C_PREFIXES) for name in ("c", "objective-c", "d")},
    **{name: Syntax(name, **_C, string_prefixes=(*_C_PREFIXES, *_CPP_RAW), delimited_raw=_CPP_RAW)
       for name in ("cpp", "cuda-cpp", "objective-cpp")},
    "php": Syntax("php", line_comments=("//", "#"), block_comments=(("/*", "*/"), ("?>", "<?")),  # HTML: text
                  not_comment=r"#\[",  # attributes
                  multiline_quotes="\"'", name_chars="$", file_opens_in="<?",
                  heredoc=r"<<<[ \t]*(?P<quote>['\"]?)(?P<word>[A-Za-z_]\w*)(?P=quote)"),
    "rust": Syntax("rust", **_C, nested_comments=True, quotes='"', multiline_quotes='"', char_literals=True,
                   string_prefixes=("b", "r", "br"), long_strings=_RUST_RAW,
                   raw_quotes=tuple(closing for _, closing in _RUST_RAW), raw_prefixes=("r", "br")),
    "ruby": Syntax("ruby", line_comments=("#",), block_comments=(("=begin", "=end"),), heredoc=_RUBY_HEREDOC,
                   multiline_quotes="\"'", interpolation="#{", regex_literals=True, regex_after=_RUBY_REGEX_AFTER,
                   block_opener=_RUBY_BLOCK),
    "r": Syntax("r", line_comments=("#",), multiline_quotes="\"'"),
    "julia": Syntax("julia", line_comments=("#",), block_comments=(("#=", "=#"),), nested_comments=True,
                    long_strings=_same('"""', "`"), quotes='"', multiline_quotes='"', interpolation="$(",
                    char_literals=True),  # and its commands `ls $dir`
    "elixir": Syntax("elixir", line_comments=("#",), long_strings=_same('"""', "'''"), multiline_quotes="\"'",
                     interpolation="#{", quote_like=_ELIXIR_SIGIL, variable=r"(?<![\w?!])\?(?:\\.|\S)",
                     variable_marks="?"),  # ?( and ?" are characters; not empty?(x)
    "lua": Syntax("lua", line_comments=("--",), block_comments=tuple(("--" + a, b) for a, b in _LUA_BRACKETS),
                  long_strings=_LUA_BRACKETS, open_ends=False, block_opener=_LUA_BLOCK),
    "shellscript": Syntax("shellscript", line_comments=("#",), not_comment=r"(?<=[^\s;&|()])#", quotes="",
                          long_strings=_same('"', "'", "`"), raw_quotes=("'",), bare_escapes=True,
                          quoted_commands=True, heredoc=_SHELL_HEREDOC, stray_closers=")", open_ends=False,
                          name_chars="$", block_opener=_SHELL_BLOCK,  # { and ( end no command
                          variable=r"\$'(?:\\.|[^'\\\n])*'"),  # $'it\'s', where a backslash escapes
    "perl": Syntax("perl", line_comments=("#",), quotes="", long_strings=_same('"', "'", "`"), forgotten_quotes=True,
                   quote_like=_PERL_QUOTE_LIKE, regex_literals=True, regex_after=_PERL_REGEX_AFTER,
                   variable=_PERL_VARIABLE, heredoc=_PERL_HEREDOC, pod=True, end_of_code=("__END__", "__DATA__"),
                   dangling_words=_PERL_OPERATORS, braced_statements=True, name_chars="$@%"),  # all strings go on
    "sql": Syntax("sql", line_comments=("--",), block_comments=(("/*", "*/"),), multiline_quotes="'",
                  open_ends=False),
    "json": Syntax("json", quotes='"'),
    "jsonc": Syntax("jsonc", **_C, quotes='"'),  # VS Code's settings.json, tsconfig.json: JSON with comments
    "css": Syntax("css", block_comments=(("/*", "*/"),), open_ends=False, name_chars="-"),  # `a { color: red;`
    **{name: Syntax(name, **_C, not_comment=r"(?:(?<=:)|(?<=url\()|(?<=URL\())//", open_ends=False, name_chars="-$")
       for name in ("scss", "less")},  # not url(http://...) nor the protocol-relative url(//cdn...)
    "haskell": Syntax("haskell", **_ML, not_comment=_HASKELL_OPERATOR),
    "elm": Syntax("elm", **_ML, long_strings=_same('"""')),
}
"""Languages whose comments and strings are read here; markup and data formats other than JSON are not among
them, and get no lexical rule."""


def syntax_for(language: str | None) -> Syntax:
    """The rules for an LSP language id; None (a caller that does not know it) is Python, the engine's own, and
    an empty id (a client that named none, of a file whose extension says nothing) no language's."""
    if language is None or language == PYTHON_NAME:
        return PYTHON
    return _BY_LANGUAGE.get(language, NEUTRAL)


EXTENSION_LANGUAGES = {
    ".py": "python", ".pyi": "python", ".pyw": "python", ".js": "javascript", ".mjs": "javascript",
    ".cjs": "javascript", ".jsx": "javascriptreact", ".ts": "typescript", ".tsx": "typescriptreact",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".cs": "csharp",
    ".go": "go", ".rs": "rust", ".java": "java", ".kt": "kotlin", ".rb": "ruby", ".php": "php", ".lua": "lua",
    ".sh": "shellscript", ".bash": "shellscript", ".zsh": "shellscript", ".json": "json", ".toml": "toml",
    ".jsonc": "jsonc", ".yaml": "yaml", ".yml": "yaml", ".md": "markdown", ".html": "html", ".css": "css",
    ".scss": "scss", ".less": "less", ".sql": "sql",
    ".swift": "swift", ".scala": "scala", ".r": "r", ".jl": "julia", ".txt": "plaintext",
    ".mts": "typescript", ".cts": "typescript", ".hh": "cpp", ".hxx": "cpp", ".cu": "cuda-cpp", ".cuh": "cuda-cpp",
    ".m": "objective-c", ".mm": "objective-cpp", ".kts": "kotlin", ".groovy": "groovy", ".dart": "dart",
    ".ex": "elixir", ".exs": "elixir", ".hs": "haskell", ".elm": "elm", ".pl": "perl", ".pm": "perl",
}
"""LSP's language id of a file, by its extension: for a client that sends none of LSP's ids, and the CLI."""


def language_of_path(path: str, default: str = "") -> str:
    return EXTENSION_LANGUAGES.get(posixpath.splitext(path)[1].lower(), default)
