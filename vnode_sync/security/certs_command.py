"""`vnodectl certs init|issue|show`: make a small site's CA and its certificates."""

import argparse
import datetime

from vnode_sync.security import certs
from vnode_sync.security.identity import ROLES

_ROLE_HELP = ("coordinator (CN coordinator, SAN DNS:coordinator + --host), node (storage agent, name = node id), "
              "compute (compute agent and batch hooks, name = host), admin, user (name = user name), "
              "monitor (a monitoring system: reads metrics and status)")


def add_certs_commands(sub) -> None:
    certs_parser = sub.add_parser("certs", help="make a CA and certificates for mutual TLS (small sites)")
    actions = certs_parser.add_subparsers(dest="certs_command", required=True, parser_class=type(certs_parser))
    p = actions.add_parser("init", help="create ca.crt and ca.key (0600) in --dir")
    p.add_argument("--dir", required=True, help="directory for the CA (made 0700)")
    p.add_argument("--days", type=int, default=certs.CA_DAYS)
    p = actions.add_parser("issue", help="sign a certificate with the CA in --dir")
    p.add_argument("--dir", required=True, help="directory holding ca.crt and ca.key")
    p.add_argument("--role", required=True, choices=ROLES, help=_ROLE_HELP)
    p.add_argument("--name", default="", help="node id, host or user name (not for coordinator)")
    p.add_argument("--host", action="append", default=[],
                   help="a DNS name or IP address clients may dial (repeatable): the coordinator's, or a node's "
                        "or compute host's for its metrics endpoint (the certificate then also serves)")
    p.add_argument("--days", type=int, default=certs.LEAF_DAYS)
    p.add_argument("--out", help="write the .crt/.key here instead of --dir")
    p = actions.add_parser("show", help="print a certificate's identity and validity, checked against a CA")
    p.add_argument("--ca", required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)


def run_certs(args: argparse.Namespace) -> None:
    if args.certs_command == "init":
        files = certs.create_ca(args.dir, days=args.days)
        print(f"CA created: {files.cert} (key {files.key}, mode 0600)")
    elif args.certs_command == "issue":
        files = certs.issue(args.dir, args.role, args.name, hosts=tuple(args.host), days=args.days,
                            out_dir=args.out)
        print(f"issued {files.cert} (key {files.key}, mode 0600)")
    elif args.certs_command == "show":
        cert = certs.check_certificate(args.ca, args.cert, args.key)
        left = cert.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc)
        print(f"{certs.common_name(cert)}: valid until {cert.not_valid_after_utc:%Y-%m-%d} ({left.days} days), "
              f"issued by the CA in {args.ca}")
