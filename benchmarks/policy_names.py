"""--policies for the benchmarks that compare sharing policies: a comma-separated list of known names."""

import argparse


def policy_list(text: str, known: tuple[str, ...], always: tuple[str, ...] = ()) -> list[str]:
    """The policies TEXT names, with ALWAYS, in KNOWN's order; a name not in KNOWN, or none at all, is an
    argparse error (one line)."""
    named = {name.strip() for name in text.split(",") if name.strip()}
    unknown = sorted(named - set(known))
    if unknown or not (named or always):
        raise argparse.ArgumentTypeError(f"unknown policy {', '.join(unknown) or '(none given)'}; "
                                         f"known: {', '.join(known)}")
    return [policy for policy in known if policy in named or policy in always]
