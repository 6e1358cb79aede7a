-- a comment (
{- a block {- nested ( -} still -}
module Main where

f x' = x' + 1
g = 'a'
h = '('
q = '"'
s = "a \"quoted\" ("
(-->) a b = a
y = a --> b
main = putStrLn s -- trailing [
