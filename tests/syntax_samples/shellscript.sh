#!/bin/bash
# a comment (
name="world ("
echo "Hello $name [" 'single ( quoted'
multi="first line (
second [ line"
echo "$(basename "$0")" # trailing (
echo it\'s ok
cat <<EOF
heredoc ( body "
EOF
count=${#array[@]}
case "$x" in
  a) echo a ;;
esac
echo "it's ("
x=$(( a * (b + c) ))
y="${x//\"/}"
z=${name#prefix}
echo $'it\'s ('
echo done
