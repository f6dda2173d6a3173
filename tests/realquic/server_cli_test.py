#!/usr/bin/env python3
"""quicsteer-server as a user runs it, without a network: --help, and a clear
error (exit 2, no crash) for every kind of bad command line or profile."""
import hashlib
import os
import subprocess
import sys
import tempfile
import unittest

SERVER = sys.argv[1]
SRC = sys.argv[2]
PROFILE = os.path.join(SRC, "configs", "realquic.yaml")


def run(*args):
    return subprocess.run([SERVER, *args], capture_output=True, text=True, timeout=30)


class ServerCli(unittest.TestCase):
    def test_help(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("QUIC-LB", r.stdout)
        self.assertIn("--server-id", r.stdout)

    def test_bad_command_lines_say_why(self):
        cases = [
            ((), "--profile is required"),
            (("--profile", PROFILE), "--server-id is required"),
            (("--profile", PROFILE, "--server-id", "0a01", "--bogus"), "unknown option '--bogus'"),
            (("--profile", PROFILE, "--server-id", "0a01", "--listen", "10.0.0.1"), "--listen: not ADDR:PORT"),
            (("--profile", PROFILE, "--server-id", "0a01", "--listen", "1.2.3.4:70000"), "--listen: not ADDR:PORT"),
            (("--profile", PROFILE, "--server-id", "0a01", "--cert", "x.pem"), "--cert and --key go together"),
            (("--profile", PROFILE, "--server-id", "0a01", "--secret", "abcd"), "--secret: 32..128 hex digits"),
            (("--profile", PROFILE, "--server-id", "0a01", "--config-id", "7"), "--config-id: 0..6"),
            (("--profile", PROFILE, "--server-id", "0a01", "--timeout", "x"), "not a number of seconds"),
            (("--profile", PROFILE, "--server-id", "zz"), "--server-id: not hex octets"),
            (("--profile", PROFILE, "--server-id", "0a0102"), "no steering.quic_lb config with server_id_len 3"),
            (("--profile", PROFILE, "--server-id", "0a03"), "server id 0a03 is in neither steering.servers nor a backend"),
            (("--profile", PROFILE, "--server-id", "0a01", "--config-id", "4"), "no steering.quic_lb config with config_id 4"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                r = run(*args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(message, r.stderr)

    def reset_secret_line(self, *extra):
        r = run("--profile", PROFILE, "--server-id", "0a01", "--listen", "127.0.0.1:0", "--duration", "0.1", *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [l for l in r.stderr.splitlines() if "reset secret" in l]
        self.assertEqual(len(lines), 1, r.stderr)
        return lines[0]

    def test_reset_secret_is_its_own_and_shown_by_fingerprint(self):
        # Without --secret: a random one per start (not derived from the
        # profile's fallback key, which would give the same every time).
        first, second = self.reset_secret_line(), self.reset_secret_line()
        self.assertIn("reset secret sha256:", first)
        self.assertIn("random", first)
        self.assertNotEqual(first, second)
        # With --secret: its fingerprint, never the secret.
        secret = "000102030405060708090a0b0c0d0e0f"
        line = self.reset_secret_line("--secret", secret)
        fingerprint = hashlib.sha256(bytes.fromhex(secret)).hexdigest()[:8]
        self.assertIn(f"reset secret sha256:{fingerprint} (--secret)", line)
        self.assertNotIn(secret, line)

    def test_bad_profile_names_the_file_and_key(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write("steering:\n  mode: sideways\n")
            path = f.name
        try:
            r = run("--profile", path, "--server-id", "0a01")
            self.assertEqual(r.returncode, 2)
            self.assertIn(path, r.stderr)
        finally:
            os.unlink(path)

    def test_unusable_files_are_errors_not_crashes(self):
        r = run("--profile", PROFILE, "--server-id", "0a01", "--cert", "/nonexistent.pem", "--key",
                "/nonexistent.key", "--listen", "127.0.0.1:0")
        self.assertEqual(r.returncode, 1)
        self.assertIn("--cert/--key", r.stderr)
        r = run("--profile", PROFILE, "--server-id", "0a01", "--log", "/nonexistent/dir/log", "--listen",
                "127.0.0.1:0")
        self.assertEqual(r.returncode, 1)
        self.assertIn("--log /nonexistent/dir/log", r.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
