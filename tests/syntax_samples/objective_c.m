// a comment (
#import <Foundation/Foundation.h>
int main() {
    NSString *s = @"a \"quoted\" (";
    char c = '(';
    return 0; /* trailing [ */
}
