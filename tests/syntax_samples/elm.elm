-- a comment (
{- a block {- nested ( -} still -}
module Main exposing (main)

c = '('
s = "a \"quoted\" ("
block = """
  multi ( line "quoted"
  """
main = text s -- trailing [
