// a comment (
/* block [ comment */
class Program {
    static void Main() {
        char c = '(';
        string s = "a \"quoted\" (";
        string p = @"C:\dir\";
        string v = @"first ""line"" (
second [ line";
        string i = $"value {x} [";
        string raw = """
            raw ( "text"
            """;
    }
}
class More {
    char a = '\'';
    string b = "\\";
    string c = $@"{x}\dir(";
}
