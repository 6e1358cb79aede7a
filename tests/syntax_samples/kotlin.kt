// a comment (
/* a block /* nested ( */ still */
fun main() {
    val c = '('
    val s = "a \"quoted\" ("
    val t = "value ${x.y} and $name ["
    val raw = """C:\dir\ ( "raw"
second [ line"""
    println(s) // trailing (
}
fun g() {
    val a = '\''
    val b = "\\"
    val c = "${'$'}x ("
}
