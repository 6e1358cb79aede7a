#include <stdio.h>
// a comment (
/* block [ comment */
int main(void) {
    char c = '(';
    char q = '"';
    const char *s = "a \"quoted\" (";
    const wchar_t *w = L"wide [";
    printf("%s %c\n", s, c); /* trailing ( */
    return 0;
}
void g(void) {
    char a = '\'';
    const char *b = "\\";
    const char *c = "a /* not a comment (";
    int d = 1; // a comment with "quote
}
