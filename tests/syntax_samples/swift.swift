// a comment (
/* a block /* nested ( */ still */
let s = "a \"quoted\" ("
let interp = "value \(x) ["
let block = """
    text ( block "quoted"
    """
func f(_ x: Int) -> Int { return x } // trailing [
let raw = #"raw "quoted" ( string"#
let a = "\\"
let nested = "value \(dict["key ("]!) done"
let escaped = "a \\(not interpolated"
