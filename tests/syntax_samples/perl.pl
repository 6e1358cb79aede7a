# a comment (
my $s = "a \"quoted\" (";
my $t = 'it\'s [';
my @w = qw(a b c);
my $q = q{a {b} (c};
$x =~ s/\(/[/g;
if ($y =~ /["(]/) { print "match\n"; }
my $multi = "first (
second [";
print <<"EOF";
heredoc ( body
EOF
for my $i (0..$#array) { print $i; }

=head1 NAME

Doc ( here

=cut

print "done\n"; # trailing (
my $h = { 'a' => 1 };
my $r = $h->{a} / 2;
my @parts = split /,/, $line;
print "a\\";
