"""What a person reads: grouped evaluations to slice (``analysis``), figures (``plots``), the HTML
report and progress bars."""
