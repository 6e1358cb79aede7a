// a comment (
/* a block /* nested ( */ still */
object Main {
  val c = '('
  val s = "a \"quoted\" ("
  val t = s"value ${x} ["
  val raw = """C:\dir ( "raw"
second [ line"""
}
