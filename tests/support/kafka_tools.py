"""Apache Kafka's own admin tools, natively: the `kafka-configs.sh`, `kafka-acls.sh` and
`kafka-topics.sh` of the apache/kafka image's /opt/kafka/bin, as wrappers that run their main
classes on the jars scripts/install fetched (.tools/kafka/libs; AclCommand and TopicCommand
come with deploy/kafka/pom.xml's kafka-tools). deploy/kafka-acls.sh runs with them when its
KAFKA_BIN names the folder, exactly as the compose `kafka-acls` job runs it in the image."""

from __future__ import annotations

import shlex
from pathlib import Path

from services.cli.broker import classpath, java_command

TOOLS = {"kafka-configs.sh": "kafka.admin.ConfigCommand",
         "kafka-acls.sh": "org.apache.kafka.tools.AclCommand",
         "kafka-topics.sh": "org.apache.kafka.tools.TopicCommand"}
# A short-lived client JVM: no optimising compiler and a small heap start it sooner.
JVM_OPTIONS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
               "-Djava.awt.headless=true")
# The tools' own log (the image's tools-log4j2.yaml): warnings and worse, on stderr.
LOG4J2 = """\
status = warn
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
"""


def kafka_bin(directory: Path, libs: Path) -> Path:
    """Write the three wrappers into `directory` (created) and return it, for KAFKA_BIN."""
    directory.mkdir(parents=True, exist_ok=True)
    log_config = directory / "tools-log4j2.properties"
    log_config.write_text(LOG4J2)
    java = [java_command(), *JVM_OPTIONS, f"-Dlog4j2.configurationFile={log_config.resolve()}",
            "-cp", classpath(libs)]
    for name, main in TOOLS.items():
        script = directory / name
        script.write_text(f'#!/bin/sh\nexec {shlex.join([*java, main])} "$@"\n')
        script.chmod(0o755)
    return directory
