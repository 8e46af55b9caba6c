package Luxd::PageCache;

# What a test that counts how luxd sends a file needs to make true about the
# page cache first, and to check stayed true (t/179, t/181).
#
# A file read just now is not "in the page cache" for long on every machine:
# the CI VMs run DAMON's proactive reclaim (a paddr "pageout" scheme), which
# evicts pages it finds cold, some of a 4 MiB file read a moment before among
# them (seen: 2 to 8 of 1024 pages gone within 0.2 s, with 23 GB free). A
# page luxd's probe then finds cold is a true miss, and a test that expected
# none failed once in a few runs. And luxd's own loop thread reads from the
# disk when it pages its code back in (or a library's): luxd then calls the
# next warm range cold, as it should (out.c loop_read_nothing).
#
# So: pin(FILE) maps a file and mlock()s it (a locked page cannot be
# reclaimed, and mlock reads every page in first), mincore() proves every
# page is resident; pin_process(PID) does that for every file luxd maps
# (its binary and libraries); disk_reads(PID) is the process's read_bytes
# (all its threads, living or gone), for a test to check that luxd read
# nothing from the disk while it measured, and to redo its setup if it did.
#
# Needs CAP_IPC_LOCK (root), as the tests that use it run.

use strict;
use warnings;
use Config;
use POSIX ();

our %NR = (    # fallbacks when syscall.ph is missing
    'x86_64'  => { mmap => 9,   munmap => 11,  mlock => 149, mincore => 27 },
    'aarch64' => { mmap => 222, munmap => 215, mlock => 228, mincore => 232 },
);

sub _nr {
    my ($name) = @_;
    my $v = eval { require 'syscall.ph'; no strict 'refs'; &{"main::SYS_$name"}() };
    return $v if defined $v;
    my ($arch) = $Config{archname} =~ /^([^-]+)/;
    return $NR{$arch}{$name} // die "Luxd::PageCache: no syscall number for $name on $Config{archname}\n";
}

my $PAGE = POSIX::sysconf(POSIX::_SC_PAGESIZE()) || 4096;

# Maps and locks PATH (its first LEN bytes when given, a whole number of
# pages); returns a handle that unlocks when it goes out of scope, or dies
# saying why. A file of 0 bytes has nothing to pin.
sub pin {
    my ($class, $path, $len) = @_;
    open my $fh, '<:raw', $path or die "pin $path: $!\n";
    $len //= -s $fh;
    my $self = bless { path => $path, len => $len, addr => 0 }, $class;
    return $self unless $len;
    my $addr = syscall(_nr('mmap'), 0, $len, 1, 1, fileno($fh), 0);    # PROT_READ, MAP_SHARED
    die "pin $path: mmap: $!\n" if $addr == -1;
    $self->{addr} = $addr;
    syscall(_nr('mlock'), $addr, $len) == 0 or die "pin $path: mlock: $! (the test needs CAP_IPC_LOCK: run as root)\n";
    my $missing = $self->missing;
    die "pin $path: $missing pages not resident after mlock\n" if $missing;
    return $self;
}

# Pages of the pinned file mincore() does not find resident (0 while pinned).
sub missing {
    my ($self) = @_;
    return 0 unless $self->{len};
    my $pages = int(($self->{len} + $PAGE - 1) / $PAGE);
    my $vec = "\0" x $pages;
    syscall(_nr('mincore'), $self->{addr}, $self->{len}, $vec) == 0 or die "mincore $self->{path}: $!\n";
    return scalar grep { !(ord($_) & 1) } split //, $vec;
}

sub DESTROY {
    my ($self) = @_;
    syscall(_nr('munmap'), $self->{addr}, $self->{len}) if $self->{addr};
}

# Pins every regular file process PID maps (its binary, its libraries):
# then luxd never waits for the disk to page its code in. Returns the list
# of handles (keep it).
sub pin_process {
    my ($class, $pid) = @_;
    open my $m, '<', "/proc/$pid/maps" or die "/proc/$pid/maps: $!\n";
    my %seen;
    my @pins;
    while (my $l = <$m>) {
        my ($path) = $l =~ m{\s(/\S.*?)\s*$} or next;
        next if $seen{$path}++ || $path =~ / \(deleted\)$/ || !-f $path;
        push @pins, $class->pin($path);
    }
    return @pins;
}

# Bytes process PID (all its threads) has caused to be read from a block
# device: the kernel counts a read when it is submitted, in the thread that
# submitted it (/proc/PID/io read_bytes; ru_inblock is the same count).
sub disk_reads {
    my ($class, $pid) = @_;
    open my $f, '<', "/proc/$pid/io" or die "/proc/$pid/io: $!\n";
    local $/;
    my ($b) = <$f> =~ /^read_bytes:\s*(\d+)/m or die "/proc/$pid/io: no read_bytes\n";
    return $b;
}

# File reads luxd has put on its thread pool so far (the read-aheads of
# out.c), from the status page at PATH (a location with status = true) of
# Luxd server S: file I/O jobs less the file cache's loads (one a miss).
# Counted without the debug log, whose lines the loop would append.
sub pool_reads {
    my ($class, $s, $path) = @_;
    my $r = $s->get($path // '/status');
    my %v = ($r->{body} // '') =~ /^luxd_(file_io_jobs_total|file_cache_misses_total) (\d+)$/mg;
    die "no file I/O counts at /status\n" unless $r->{status} == 200 && keys %v == 2;
    return $v{file_io_jobs_total} - $v{file_cache_misses_total};
}

1;
