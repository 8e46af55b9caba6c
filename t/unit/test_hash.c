/* Unit tests for the keyed hash (src/hash.c): SipHash-2-4 against the
 * published vectors of the SipHash authors (the reference implementation's
 * vectors.h: key 00 01 .. 0f, message i the bytes 00 01 .. i-1, the output
 * as its 8 little-endian bytes; vector 15 is the paper's Appendix A
 * example, a129ca6149be45e5), SipHash-1-3 against the 64 vectors Rust's core
 * library tests its SipHasher13 with (same key and messages), and lx_hash's
 * keying: another key, or the seed argument, gives other hashes. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hash.h"
#include "lx.h"
#include "tap.h"

/* The output as the vectors print it: its bytes, least significant first. */
static void le_hex(uint64_t v, char out[17]) {
    for (int i = 0; i < 8; i++)
        snprintf(out + 2 * i, 3, "%02x", (unsigned)((v >> (8 * i)) & 0xff));
}

static const char *const sip24[64] = {
    "310e0edd47db6f72", "fd67dc93c539f874", "5a4fa9d909806c0d", "2d7efbd796666785",
    "b7877127e09427cf", "8da699cd64557618", "cee3fe586e46c9cb", "37d1018bf50002ab",
    "6224939a79f5f593", "b0e4a90bdf82009e", "f3b9dd94c5bb5d7a", "a7ad6b22462fb3f4",
    "fbe50e86bc8f1e75", "903d84c02756ea14", "eef27a8e90ca23f7", "e545be4961ca29a1",
    "db9bc2577fcc2a3f", "9447be2cf5e99a69", "9cd38d96f0b3c14b", "bd6179a71dc96dbb",
    "98eea21af25cd6be", "c7673b2eb0cbf2d0", "883ea3e395675393", "c8ce5ccd8c030ca8",
    "94af49f6c650adb8", "eab8858ade92e1bc", "f315bb5bb835d817", "adcf6b0763612e2f",
    "a5c91da7acaa4dde", "716595876650a2a6", "28ef495c53a387ad", "42c341d8fa92d832",
    "ce7cf2722f512771", "e37859f94623f3a7", "381205bb1ab0e012", "ae97a10fd434e015",
    "b4a31508beff4d31", "81396229f0907902", "4d0cf49ee5d4dcca", "5c73336a76d8bf9a",
    "d0a704536ba93e0e", "925958fcd6420cad", "a915c29bc8067318", "952b79f3bc0aa6d4",
    "f21df2e41d4535f9", "87577519048f53a9", "10a56cf5dfcd9adb", "eb75095ccd986cd0",
    "51a9cb9ecba312e6", "96afadfc2ce666c7", "72fe52975a4364ee", "5a1645b276d592a1",
    "b274cb8ebf87870a", "6f9bb4203de7b381", "eaecb2a30b22a87f", "9924a43cc1315724",
    "bd838d3aafbf8db7", "0b1a2a3265d51aea", "135079a3231ce660", "932b2846e4d70666",
    "e1915f5cb1eca46c", "f325965ca16d629f", "575ff28e60381be5", "724506eb4c328a95",
};

static const char *const sip13[64] = {
    "dcc40f055801acab", "93ca577df39bf4c9", "4dd4c74d029bcb82", "fbf7dde7b80af88b",
    "2883d388605775cf", "673b53492fd5f9de", "a7229fc5502b0dc5", "4011b19b987d92d3",
    "8e9a298d11959036", "e43d066cb38ea425", "7f09ff92ee85de79", "52c34df9c118c170",
    "a2d9b457b184a378", "a7ff29120c766f30", "345df9c011a15a60", "5699512a6dd820d3",
    "668b907d1add4fcc", "0cd8db639068f29c", "3ee673b49c38fc8f", "1c7d298de59d1ff2",
    "40e0cca6462fdcc0", "44f8452bfeab92b9", "2e8720a39b7bfe7f", "23c1e6da7f0e5a52",
    "8c9c3467b2ae64f4", "79095b702859cd45", "a51399cae3353e3a", "353bde4a4ec71da9",
    "0dd06cef02ed0bfb", "f4e1b14ab43cd988", "63e6c543d6110f54", "bcd1218c1fdd7023",
    "0db6a7166c7b1581", "bff98f7ae5b9544d", "3e752a1f78129f75", "916b18bfbea3a1ce",
    "0662a2add308f52c", "5730c3a32d1c10b6", "a1363aae9674f4b3", "9283107b54576b62",
    "3115e4993236d2c1", "44d91a3f92c17c66", "258813c8fe4f7065", "a64989c2d180f224",
    "6b87f8faed1ccac2", "9621049ffc4b16c2", "23d6b168939c6ea1", "fd14518b9c16fb49",
    "464c07dff843319f", "b386cc1224affdc6", "8f09520ad149af7e", "9a2f299d5513f31c",
    "121ff4a2dd304ac4", "d01ea74389e9fa36", "e6bcf0734cb38f31", "80e9a77036bf7aa2",
    "756d3c24dbc0bcb4", "1315b7fd52d8f823", "088a7da64d5f038f", "48f1e8b7e5d09cd8",
    "ee44a6f7bce6f4f6", "f237180fd89ac5ae", "e094664b15f6b2c3", "a8b3bbb76290199d",
};

int main(void) {
    uint8_t key[16], msg[64];
    char hex[17];
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;

    for (int n = 0; n < 64; n++) {
        le_hex(lx_siphash(2, 4, key, msg, (size_t)n), hex);
        is_str(hex, sip24[n], "SipHash-2-4 vector %d (%d bytes)", n, n);
    }
    ok(lx_siphash(2, 4, key, msg, 15) == 0xa129ca6149be45e5ULL,
       "SipHash-2-4: the paper's example, 15 bytes, is a129ca6149be45e5");
    for (int n = 0; n < 64; n++) {
        le_hex(lx_siphash(1, 3, key, msg, (size_t)n), hex);
        is_str(hex, sip13[n], "SipHash-1-3 vector %d (%d bytes)", n, n);
    }

    /* Before any key is set (a process that never seeds): the all-zero
     * key, whose fingerprint t/137-hash-seed.t makes sure -T never shows. */
    ok(lx_hash_fingerprint() == 0xd1fba762150c532cULL, "unseeded: the all-zero key's fingerprint");

    /* lx_hash is SipHash-1-3 under the process key, the seed argument xored
     * into k0. */
    lx_hash_set_key(key);
    ok(lx_hash(msg, 17, 0) == lx_siphash(1, 3, key, msg, 17),
       "lx_hash is SipHash-1-3 under the key");
    uint8_t key2[16];
    memcpy(key2, key, 16);
    key2[0] ^= 1;
    ok(lx_hash(msg, 17, 1) == lx_siphash(1, 3, key2, msg, 17),
       "the seed argument is xored into k0");
    uint64_t fp1 = lx_hash_fingerprint(), h1 = lx_hash("example.com", 11, 0);

    /* Two keys, as two processes have: the same host name hashes apart,
     * and so does the fingerprint -T prints. */
    uint8_t other[16];
    for (int i = 0; i < 16; i++)
        other[i] = (uint8_t)(0xa5 ^ (i * 7));
    lx_hash_set_key(other);
    ok(lx_hash("example.com", 11, 0) != h1, "another key hashes example.com to another value");
    ok(lx_hash_fingerprint() != fp1, "and has another fingerprint");

    /* A fresh random key (what luxd does at start) differs from both. */
    is_int(lx_hash_seed(), 0, "lx_hash_seed: getrandom gave a key");
    uint64_t fp3 = lx_hash_fingerprint();
    ok(fp3 != fp1 && fp3 != lx_siphash(1, 3, other, "", 0), "a random key is neither of them");
    is_int(lx_hash_seed(), 0, "seeding again");
    ok(lx_hash_fingerprint() != fp3, "each seeding draws a new key");
    return done_testing();
}
