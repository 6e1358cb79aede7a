# a comment (
#= a block #= nested ( =# still =#
function greet(name)
    c = '('
    q = '"'
    t = A' * B
    s = "Hello $(name) ["
    multi = "first line (
second line"
    doc = """
    triple ( "quoted"
    """
    y = x[1:3]'
    return s * "#not a comment"  # trailing [
end
c = '\''
d = [1 2]'
e = "$(x["k"]) ("
f = `ls $dir`
g = raw"C:\dir ("
