"""Test and benchmark kit: private PostgreSQL and Redis servers on free loopback ports
(``services``), the conformance kit every backend passes (``conformance``), and a fake GPU
that runs the service's CUDA timing code on a simulated clock (``fake_cuda``)."""
