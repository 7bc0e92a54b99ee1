"""The data contract: what a run file holds, which studies exist, and what their variants
are called.  ``bench`` (which writes run files) and ``publish`` (which reads them) both
import it; it imports neither, so the measuring side never depends on the site."""
