// a comment (
/* a block /* nested ( */ still */
void main() {
  final re = RegExp(r'https?://\S+');
  var s = 'it\'s (';
  var t = "value ${x.y} and $name [";
  var block = '''
  multi ( line
  ''';
  print(s); // trailing (
}
void g() {
  var a = r"raw \ (";
  var b = "${'nested ('} done";
}
