"""payroll-sandbox: a local sandbox simulator of a payroll-connectivity service."""

__version__ = "0.1.0"
