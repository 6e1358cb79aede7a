// Package main does things (
package main

import "fmt"

/* block [ comment */
func main() {
	s := "a \"quoted\" ("
	r := 'x'
	q := '"'
	raw := `C:\dir\ ( "raw"
second line [`
	fmt.Println(s, r, q, raw) // trailing (
}

func g() {
	a := '\''
	b := "\\"
	c := `// not a comment (`
	_ = a + b + c
}
