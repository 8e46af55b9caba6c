# A handler that returns a 1xx status: a 1xx is an interim response, so
# sent as the answer the client waits on for a final one and takes the next
# pipelined request's response for it (responses out of step). finish()
# answers 500 instead. Found in review of issue 9.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use Luxd::Stream qw(test_server);

my $H = "Host: localhost\r\n";
my $s = test_server();

for my $code (100, 101, 199) {
    my $c = $s->connect;
    $c->send("GET /t/status?code=$code HTTP/1.1\r\n$H\r\nGET /a.txt HTTP/1.1\r\n$H\r\n");
    my @r = $c->responses(2, timeout => 5);
    check_response($r[0], { status => 500 }, "status $code from a handler is a 500");
    check_response($r[1], { status => 200, body => "aaa\n" }, '... and the next response is the next request\'s');
    $c->close;
}
$s->stop;
done_testing;
