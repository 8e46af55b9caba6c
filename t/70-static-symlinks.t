# follow_symlinks (issue 8 #8): www/pw -> /etc/passwd must not be served.
# Each mode (true, false, "owner", and the default, which is "owner") against
# a link to /etc/passwd, a link inside the root, a link in a directory
# component; locations inherit and override; vhost_dir hosts follow no link
# unless the default vhost says "owner"; a cached file replaced by a link is noticed.
use strict;
use warnings;
use Test::More;
use POSIX ();
use IO::Socket::UNIX;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

# A link whose owner differs from its target's. As root the link is given
# to uid 65534 (a tenant, say); otherwise the tests' own link to a
# root-owned file already has another owner.
sub link_other_owner {
    my ($target, $path) = @_;
    symlink($target, $path) or die "symlink $path: $!";
    if ($> == 0) { POSIX::lchown(65534, -1, $path) or die "lchown $path: $!" }
    my $lu = (lstat $path)[4];
    my $tu = (stat $path)[4];
    die "$path: link and target have one owner ($lu)" if defined $tu && $lu == $tu;
}

sub link_same_owner {
    my ($target, $path) = @_;
    symlink($target, $path) or die "symlink $path: $!";
}

# The tree every site below serves: real files, a link inside the root, a
# directory link, and links to /etc/passwd and /etc owned by someone else.
sub make_tree {
    my ($root) = @_;
    for my $d ($root, "$root/d") { -d $d or mkdir $d or die "$d: $!" }
    for (['real.txt', "real\n"], ['d/f.txt', "sub\n"]) {
        open my $fh, '>', "$root/$_->[0]" or die; print $fh $_->[1]; close $fh;
    }
    link_same_owner('real.txt', "$root/in.txt");
    link_same_owner('d', "$root/dl");
    link_other_owner('/etc/passwd', "$root/pw");
    link_other_owner('/etc', "$root/etc");
}

sub status_of {
    my ($s, $host, $path) = @_;
    my $r = $s->http(path => $path, host => $host);
    my $st = $r->{status} // 'none';
    $st .= ' LEAK' if ($r->{body} // '') =~ /^root:/m;
    $st .= ' ' . $r->{body} if $st eq '200' && defined $r->{body} && length $r->{body} < 16;
    chomp $st;
    return $st;
}

# path => [ true, "owner" (and the default), false ]
my @cases = (
    ['/real.txt',    '200 real', '200 real', '200 real'],
    ['/d/f.txt',     '200 sub',  '200 sub',  '200 sub'],
    ['/in.txt',      '200 real', '200 real', '403'],
    ['/dl/f.txt',    '200 sub',  '200 sub',  '403'],
    ['/pw',          '200 LEAK', '403',      '403'],
    ['/etc/passwd',  '200 LEAK', '403',      '403'],
);

subtest 'a config that does not mention the key: a link to /etc/passwd is refused' => sub {
    my $d = Luxd->new(no_start => 1);
    make_tree($d->dir . '/www');
    $d->start;
    is(status_of($d, 'localhost', $_->[0]), $_->[2], "default: $_->[0]") for @cases;
    $d->stop;
};

my $s = Luxd->new(no_start => 1, config => <<'EOF');
vhost "default.test" { default = true, root = "$DIR/www",
  location "/lf/" { follow_symlinks = false },
  location "/lt/" { follow_symlinks = true },
  location "/li/" { },
}
vhost "true.test"  { root = "$DIR/www", follow_symlinks = true }
vhost "listing.test" { root = "$DIR/www", dir_listing = true }
vhost "listing-true.test" { root = "$DIR/www", dir_listing = true, follow_symlinks = true }
vhost "false.test" { root = "$DIR/www", follow_symlinks = false }
vhost "owner.test" { root = "$DIR/www", follow_symlinks = "owner",
  location "/li/" { },
}
EOF
make_tree($s->dir . '/www');
make_tree($s->dir . "/www/$_") for qw(lf lt li);
$s->start;

subtest 'the default is "owner": a link to /etc/passwd is refused' => sub {
    for my $c (@cases) {
        is(status_of($s, 'default.test', $c->[0]), $c->[2], "default: $c->[0]");
    }
};

for my $m (['true', 1], ['"owner"', 2], ['false', 3]) {
    my ($name, $i) = @$m;
    (my $host = $name) =~ s/"//g;
    subtest "follow_symlinks = $name" => sub {
        for my $c (@cases) {
            is(status_of($s, "$host.test", $c->[0]), $c->[$i], "$name: $c->[0]");
        }
    };
}

subtest 'locations override and inherit' => sub {
    for my $c (@cases) {
        is(status_of($s, 'default.test', "/lf$c->[0]"), $c->[3], "location false: /lf$c->[0]");
        is(status_of($s, 'default.test', "/lt$c->[0]"), $c->[1], "location true: /lt$c->[0]");
        is(status_of($s, 'default.test', "/li$c->[0]"), $c->[2], "location inherits the default: /li$c->[0]");
        is(status_of($s, 'owner.test', "/li$c->[0]"), $c->[2], "location inherits \"owner\": /li$c->[0]");
    }
};

subtest 'index files, gzip variants and listings go through the same check' => sub {
    my $w = $s->dir . '/www';
    mkdir "$w/ix" or die;
    link_other_owner('/etc/passwd', "$w/ix/index.html");
    is(status_of($s, 'default.test', '/ix/'), '403', 'an index.html that links to /etc/passwd: 403');
    is(status_of($s, 'true.test', '/ix/'), '200 LEAK', 'with follow_symlinks = true it is served');
};

subtest 'directory listings: opened under the policy, links not stat-ed through' => sub {
    my $w = $s->dir . '/www';
    mkdir "$w/ls" or die;
    open my $fh, '>', "$w/ls/mine.txt" or die; print $fh "12345\n"; close $fh;
    link_other_owner('/etc/passwd', "$w/ls/pw");
    link_other_owner('/etc', "$w/lsl");
    my $pwsize = (stat '/etc/passwd')[7];
    my $r = $s->http(path => '/ls/', host => 'listing.test');
    is($r->{status}, 200, 'listing: 200');
    like($r->{body}, qr{>mine\.txt</a>\s+\S.*\s6\n}, 'a file shows its size');
    my ($pwline) = ($r->{body} // '') =~ m{^(<a href="pw">.*)$}m;
    ok(defined $pwline, 'the link is listed by name') or diag($r->{body});
    unlike($pwline // '', qr/\s$pwsize$/, 'without the size of /etc/passwd');
    like($pwline // '', qr/\s-$/, 'but "-"');
    is(status_of($s, 'listing.test', '/lsl/'), '403', 'a directory link to /etc is not listed');
    unlike($s->http(path => '/lsl/', host => 'listing.test')->{body} // '', qr/passwd/, 'nothing of /etc shows');
    my $t = $s->http(path => '/lsl/', host => 'listing-true.test');
    is($t->{status}, 200, 'with follow_symlinks = true it is listed');
    like($t->{body} // '', qr/passwd/, 'and /etc shows');
};

subtest 'a cached file replaced by a link is checked again' => sub {
    my $w = $s->dir . '/www';
    open my $fh, '>', "$w/swap.txt" or die; print $fh "plain\n"; close $fh;
    is(status_of($s, 'default.test', '/swap.txt'), '200 plain', 'a plain file, now cached');
    unlink "$w/swap.txt" or die;
    link_other_owner('/etc/passwd', "$w/swap.txt");
    my $st = '';
    my $deadline = time + 5;
    while (time < $deadline) {
        $st = status_of($s, 'default.test', '/swap.txt');
        last if $st eq '403';
        sleep 0.1;
    }
    is($st, '403', 'refused once the cache revalidates (at most a second)');
};

subtest 'luxd -t: the key takes true, false or "owner" only' => sub {
    for my $v ('"yes"', '1', '"OWNER"', '{}') {
        my ($rc, $out) = Luxd::check_config(qq{vhost "x" {\n  root = "\$DIR",\n  follow_symlinks = $v,\n}\n});
        is($rc, 1, "follow_symlinks = $v is refused");
        like($out, qr/luxd\.lua:3: vhost "x": "follow_symlinks" must be true, false or "owner", got /, 'with file:line and what is allowed');
    }
    for my $v ('true', 'false', '"owner"') {
        my ($rc, $out) = Luxd::check_config(qq{vhost "x" { root = "\$DIR", follow_symlinks = $v }\n});
        is($rc, 0, "follow_symlinks = $v is accepted") or diag($out);
    }
};

# A link loop is refused, not an error of the server's: nginx answers 403,
# and a 500 would have any tenant's loop fill the error log. A Unix socket
# in the root is one of the files never served (as FIFOs and devices are),
# but opening one fails with ENXIO, which also became 500.
subtest 'a link loop and a socket in the root: 403 in every mode' => sub {
    my $w = $s->dir . '/www';
    link_same_owner('loop', "$w/loop");
    link_same_owner('l2', "$w/l1");
    link_same_owner('l1', "$w/l2");
    my $u = IO::Socket::UNIX->new(Local => "$w/sock", Listen => 1) or die "socket: $!";
    for my $host (qw(default.test true.test false.test owner.test)) {
        for my $path ('/loop', '/l1', '/loop/x', '/sock') {
            is(status_of($s, $host, $path), '403', "$host$path");
        }
    }
    close $u;
};

# An error page is opened as written (a request's path is normalised, a
# page's is not): "/../secret.txt" climbed out of the root, served with the
# default "owner" through the component walk, and with false too on a
# kernel without openat2. -t refuses such a page; the opener refuses ".."
# in any case (t/unit/test_open_beneath).
subtest 'luxd -t: an error page path with "." or ".." segments is refused' => sub {
    for my $page ('/../secret.txt', '/a/../404.html', '/./404.html', '/errors/..', '/..') {
        my ($rc, $out) = Luxd::check_config(qq{vhost "x" {\n  root = "\$DIR",\n  error_pages = { [404] = "$page" },\n}\n});
        is($rc, 1, "error page $page is refused");
        like($out, qr/luxd\.lua:3: vhost "x": "error_pages"\[404\] must not have "\." or "\.\." segments, got "\Q$page\E"/, 'with file:line') or diag($out);
    }
    for my $page ('/404.html', '/errors/404.html', '/..html', '/.well/x', '/a..b/c') {
        my ($rc, $out) = Luxd::check_config(qq{vhost "x" { root = "\$DIR", error_pages = { [404] = "$page" } }\n});
        is($rc, 0, "error page $page is accepted") or diag($out);
    }
};
$s->stop;

# vhost_dir: every host's tree may be another tenant's. A default vhost
# that follows every link must not carry that over to the hosts, and one
# that says nothing leaves them following none: "owner" trusts the owners on
# disk, which a tarball unpacked by root sets to whatever its author chose.
for my $default (['true', '"owner"'], ['false', 'false'], ['"owner"', '"owner"'], [undef, 'false']) {
    my ($dmode, $effective) = @$default;
    my $key = defined $dmode ? ", follow_symlinks = $dmode" : '';
    my $name = defined $dmode ? "follow_symlinks = $dmode" : 'no follow_symlinks';
    subtest "vhost_dir with a default vhost of $name: hosts get $effective" => sub {
        my $v = Luxd->new(no_start => 1, server => { vhost_dir => '$DIR/sites' }, config => <<"EOF");
vhost "main.test" { default = true, root = "\$DIR/www"$key }
EOF
        my $sites = $v->dir . '/sites';
        mkdir $sites or die;
        make_tree("$sites/tenant.test");
        # An alias made by the operator: the host's root itself is a link.
        symlink('tenant.test', "$sites/alias.test") or die;
        $v->start;
        my $i = $effective eq 'false' ? 3 : 2;
        for my $c (@cases) {
            is(status_of($v, 'tenant.test', $c->[0]), $c->[$i], "tenant.test$c->[0]");
        }
        is(status_of($v, 'alias.test', '/real.txt'), '200 real', 'a host directory that is a link is served');
        is(status_of($v, 'alias.test', '/pw'), '403', 'and the policy applies below it');
        $v->stop;
    };
}

subtest 'vhost_dir without a default vhost: false' => sub {
    my $v = Luxd->new(no_start => 1, server => { vhost_dir => '$DIR/sites' }, config => "\n");
    my $sites = $v->dir . '/sites';
    mkdir $sites or die;
    make_tree("$sites/tenant.test");
    # What an archive unpacked by root can carry: a link owned by root to a
    # file owned by root, which "owner" would follow.
    symlink('/etc/passwd', "$sites/tenant.test/rootpw") or die;
    $v->start;
    is(status_of($v, 'tenant.test', $_->[0]), $_->[3], "tenant.test$_->[0]") for @cases;
    is(status_of($v, 'tenant.test', '/rootpw'), '403', 'a root-owned link to a root-owned file is refused');
    $v->stop;
};

done_testing;
