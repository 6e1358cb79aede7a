# a comment (
greet <- function(name) {
  single <- 'it\'s ('
  double <- "Hello ["
  multi <- "first line (
second line"
  other <- 'one
two {'
  x <- c(1, 2) # trailing [
  paste0(double, single, "#not a comment")
}
raw <- r"(raw "string" ()"
`my var` <- 1
y <- x %in% c("a (", "b")
