# payroll-sandbox in a container: serves the bundled fixtures and scenarios on port 8080.
#   docker build -t payroll-sandbox .
#   docker run --rm -p 8080:8080 payroll-sandbox
FROM python:3.12-slim

WORKDIR /app
# Dependencies first, in a layer of their own: a change to the source does not reinstall them.
# The versions are the lock's (constraints.txt, the ones CI tested), so a build is reproducible.
COPY pyproject.toml constraints.txt ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install --no-cache-dir -c constraints.txt -r /tmp/requirements.txt
COPY README.md ./
COPY simulator ./simulator
COPY fixtures ./fixtures
COPY scenarios ./scenarios
RUN pip install --no-cache-dir --no-deps . && useradd --create-home --uid 10001 sandbox

USER sandbox
# Fills the start-up cache (simulator/load/loadcache.py) with the bundled fixtures' load, so a
# container's start skips the YAML and the catalog's build, as a second start does.
RUN payroll-sandbox fixtures validate
# Inside a container the server must listen on every interface to be reachable. Other
# containers that reach it by a name need that name allowed: PAYROLL_SANDBOX_ALLOWED_HOSTS.
ENV PAYROLL_SANDBOX_HOST=0.0.0.0 \
    PAYROLL_SANDBOX_PORT=8080 \
    PYTHONUNBUFFERED=1
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/health', timeout=2)"]
ENTRYPOINT ["payroll-sandbox"]
CMD ["serve"]
