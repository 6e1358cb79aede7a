// a comment (
/* block [ comment */
void main() {
    char c = '(';
    string s = "a \"quoted\" (";
}
