# fish completion for qk and its qk-* links
function __qk_types
    qk quant --list-types 2>/dev/null | awk 'NR>1 {print $1}'
end
complete -c qk -n __fish_use_subcommand -f -a inspect -d 'look inside checkpoints'
complete -c qk -n __fish_use_subcommand -f -a quant -d 'encode/decode tensors'
# inspect
for cmd in qk-inspect
    complete -c $cmd -l tensors -r -d 'only tensors matching GLOB'
    complete -c $cmd -l meta -r -d 'only metadata keys matching GLOB'
    complete -c $cmd -l meta-full -d 'every metadata value in full'
    complete -c $cmd -l stats -d 'per-tensor statistics'
    complete -c $cmd -l diff -d 'compare two checkpoints'
    complete -c $cmd -l max-rmse -r -d 'exit 1 above this RMSE'
    complete -c $cmd -l min-snr -r -d 'exit 1 below this SNR (dB)'
    complete -c $cmd -l json -d 'JSON output'
    complete -c $cmd -s t -l threads -r -d threads
    complete -c $cmd -s q -l quiet -d 'no progress bar'
    complete -c $cmd -s h -l help -d help
end
complete -c qk -n '__fish_seen_subcommand_from inspect' -l stats -d 'per-tensor statistics'
complete -c qk -n '__fish_seen_subcommand_from inspect' -l diff -d 'compare two checkpoints'
complete -c qk -n '__fish_seen_subcommand_from inspect' -l json -d 'JSON output'
complete -c qk -n '__fish_seen_subcommand_from inspect' -l tensors -r -d 'only tensors matching GLOB'
complete -c qk -n '__fish_seen_subcommand_from inspect' -l meta -r -d 'only metadata keys matching GLOB'
complete -c qk -n '__fish_seen_subcommand_from inspect' -l meta-full -d 'every metadata value in full'
complete -c qk -n '__fish_seen_subcommand_from inspect' -l max-rmse -r -d 'exit 1 above this RMSE'
complete -c qk -n '__fish_seen_subcommand_from inspect' -l min-snr -r -d 'exit 1 below this SNR (dB)'
# quant
for cmd in qk-quant
    complete -c $cmd -l list-types -d 'print the format table'
    complete -c $cmd -l raw-encode -x -a '(__qk_types)' -d 'encode float32 rows'
    complete -c $cmd -l raw-decode -x -a '(__qk_types)' -d 'decode rows to float32'
    complete -c $cmd -l shape -x -d ROWSxCOLS
    complete -c $cmd -l imatrix -r -d 'importance weights'
    complete -c $cmd -l json -d 'JSON output'
    complete -c $cmd -s t -l threads -r -d threads
    complete -c $cmd -s q -l quiet -d quiet
    complete -c $cmd -s h -l help -d help
end
complete -c qk -n '__fish_seen_subcommand_from quant' -l list-types -d 'print the format table'
complete -c qk -n '__fish_seen_subcommand_from quant' -l raw-encode -x -a '(__qk_types)'
complete -c qk -n '__fish_seen_subcommand_from quant' -l raw-decode -x -a '(__qk_types)'
complete -c qk -n '__fish_seen_subcommand_from quant' -l shape -x
complete -c qk -n '__fish_seen_subcommand_from quant' -l imatrix -r
