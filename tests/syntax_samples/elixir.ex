# a comment (
defmodule Greeter do
  @moduledoc """
  Docs ( with "quotes"
  """
  def greet(name) do
    single = 'char ( list'
    double = "Hello #{name} ["
    multi = "first line (
second line"
    other = 'one
two ['
    sigil = ~s(a string)
    atom = :ok
    q = ?(
    "#{double} done" # trailing (
  end
end
defmodule More do
  def f do
    a = ~r/\//
    b = ~s{a (}
    c = ?\\
    d = :"atom with ("
    e = "#{"nested ("} done"
    g = '''
    charlist ( heredoc
    '''
  end
end
