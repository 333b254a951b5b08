"""Operating the loop: alerts, the monitor's records, the status summary, secret redaction."""
