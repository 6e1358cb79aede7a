// a comment (
#import <Foundation/Foundation.h>
void f() {
    NSString *s = @"a \"quoted\" (";
    auto r = R"x(raw ")" ()x";
}
