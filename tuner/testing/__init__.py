"""Test and benchmark kit: private PostgreSQL and Redis servers on free loopback ports."""
