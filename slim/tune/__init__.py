"""`slim tune`: measure only what the batch-cap decision needs. The belief (`belief`, its kernel
`kernel`), the session and its next measurement (`session`), the bound on what it spends (`guard`),
a trace folder to a session and the benchmark command lines (`plan`), the ``--run`` loop (`runner`),
its report (`report`) and its command line (`cli`); the decision itself is `slim.advisor.decision`."""
