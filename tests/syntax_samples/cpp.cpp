#include <string>
// a comment (
int main() {
    auto s = R"(say "hi" (\)";
    auto q = R"sql(SELECT ")" (
FROM t)sql";
    int n = 1'000;
    char c = '(';
    std::string t = u8"text [";
    return 0; /* trailing ( */
}
