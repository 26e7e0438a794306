"""Command-line lists of numbers: with commas, with spaces, or both."""

import pytest

from arm_dyn_id.cli import build_parser, join_number_lists


@pytest.mark.parametrize('argv, expected', [
    (['fit', 'bag', '--torque-constants', '1.5', '1.5', '2'],
     ['fit', 'bag', '--torque-constants', '1.5,1.5,2']),
    (['fit', '--torque-constants', '1.5', '2', 'bag'],
     ['fit', '--torque-constants', '1.5,2', 'bag']),
    (['fit', '--torque-constants', '1.5,', '2,', '3', '--quiet', 'bag'],
     ['fit', '--torque-constants', '1.5,2,3', '--quiet', 'bag']),
    (['fit', '--torque-constants', '1.5,2', '3', 'bag'],
     ['fit', '--torque-constants', '1.5,2,3', 'bag']),
    (['fit', 'bag', '--gravity-vector', '0', '0', '-9.81', '--out', 'x'],
     ['fit', 'bag', '--gravity-vector', '0,0,-9.81', '--out', 'x']),
    (['fit', 'bag', '--torque-constants', '1.5,1.5'],
     ['fit', 'bag', '--torque-constants', '1.5,1.5']),
    (['fit', 'bag', '--torque-constants', 'x', 'y'],
     ['fit', 'bag', '--torque-constants', 'x', 'y']),
])
def test_number_lists_are_joined_with_commas(argv, expected):
    assert join_number_lists(argv) == expected


def test_fit_parses_space_separated_torque_constants():
    argv = join_number_lists(['fit', '--torque-constants', '13', '13', '10', 'my_bag',
                              '--urdf', 'arm.urdf', '--out', 'fit'])
    args = build_parser(argv).parse_args(argv)
    assert args.torque_constants == '13,13,10'
    assert [str(b) for b in args.bags] == ['my_bag']
