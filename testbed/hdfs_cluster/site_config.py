"""Hadoop's configuration files: *-site.xml and log4j.properties."""

import os
from xml.sax.saxutils import escape


def site_xml(properties: dict[str, object]) -> str:
    entries = "".join(f"  <property><name>{escape(k)}</name><value>{escape(str(v))}</value></property>\n"
                      for k, v in properties.items())
    return f'<?xml version="1.0"?>\n<configuration>\n{entries}</configuration>\n'


def log4j_properties(level: str, audit_log: str | None = None) -> str:
    lines = [f"log4j.rootLogger={level},console",
             "log4j.appender.console=org.apache.log4j.ConsoleAppender",
             "log4j.appender.console.target=System.err",
             "log4j.appender.console.layout=org.apache.log4j.PatternLayout",
             "log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{2}: %m%n",
             "log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR"]
    if audit_log:
        audit = "org.apache.hadoop.hdfs.server.namenode.FSNamesystem.audit"
        lines += [f"log4j.logger.{audit}=INFO,audit", f"log4j.additivity.{audit}=false",
                  "log4j.appender.audit=org.apache.log4j.FileAppender",
                  f"log4j.appender.audit.File={audit_log}",
                  "log4j.appender.audit.layout=org.apache.log4j.PatternLayout",
                  "log4j.appender.audit.layout.ConversionPattern=%d{ISO8601} %m%n"]
    return "\n".join(lines) + "\n"


def write_conf(directory: str, core: dict, hdfs: dict, log4j: str) -> str:
    os.makedirs(directory, exist_ok=True)
    for filename, text in (("core-site.xml", site_xml(core)), ("hdfs-site.xml", site_xml(hdfs)),
                           ("log4j.properties", log4j)):
        with open(os.path.join(directory, filename), "w") as f:
            f.write(text)
    return directory
