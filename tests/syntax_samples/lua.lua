-- a comment (
--[[ a block [ comment ]]
--[==[ a long ]] ( comment ]==]
local s = "a \"quoted\" ("
local t = 'it\'s ['
local long = [[ a long ( string
second [ line ]]
local lvl = [=[ a ]] ( ]=]
print(s) -- trailing (
local x = t[a[1]]
local y = "a\"b ("
local z = 'it\'s ['
