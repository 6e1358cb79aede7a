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
{-# LANGUAGE TemplateHaskell #-}
a = '\''
b = "\\"
c = x'' + y'
d = 'map
e = ''Maybe
-- | Haddock (
f = "it's -- not a comment ("
