// a comment (
/** Javadoc [ with "quotes" */
public class Main {
    static final char C = '(';
    static final char Q = '"';
    public static void main(String[] args) {
        String s = "a \"quoted\" (";
        String block = """
            text ( block "with" quotes
            """;
        System.out.println(s + block); /* trailing [ */
    }
}
