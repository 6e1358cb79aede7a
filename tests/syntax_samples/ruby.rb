# a comment (
=begin
a block comment [
=end
def greet(name)
  single = 'it\'s ('
  double = "Hello #{name} ["
  multi = "first line (
second line"
  other = 'one
two ['
  text = <<~EOS
    heredoc ( body "
  EOS
  raw = <<-'RAW'
    raw #{not} [
  RAW
  mask = 1 << 4
  list = %w[a b c]
  sym = :name
  h = { "k" => 1 }
  puts "#{h["k"]} done" # trailing (
end
def more(x)
  a = %q(it's)
  b = x ? 'a' : 'b'
  c = :"sym ("
  d = "#{x} #{"y ("}"
  case x
  when /"/ then 1
  end
  e = 'it\'s ['
end
